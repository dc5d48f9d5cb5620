// SPDX-License-Identifier: GPL-2.0

//! The functions and constants of `sys/glue.c`, as Rust sees them. Each declaration mirrors
//! its definition there; `struct nva_ctrl` is opaque to Rust.
//!
//! `improper_ctypes` is allowed as in the kernel crate's bindings: bindgen gives some kernel
//! structs (lockdep keys, empty arrays) zero-sized fields, which only ever sit behind pointers.
//!
//! C header: `sys/glue.h`

#![allow(improper_ctypes)]

use kernel::bindings::{
    blk_mq_tag_set,
    blk_mq_tags,
    completion,
    device,
    dma_pool,
    io_comp_batch,
    mempool_t,
    pci_dev,
    request,
    rq_list,
    sg_table, //
};
use kernel::ffi::{
    c_char,
    c_int,
    c_uint,
    c_ulong,
    c_void, //
};

/// `struct nva_ctrl`: nvme-core's controller and the tag sets it points at.
#[repr(C)]
pub(crate) struct NvaCtrl {
    _opaque: [u8; 0],
}

/// `struct nva_dma_seg`: one DMA range from the block layer's mapping iterators, or a
/// request's one segment mapped directly.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub(crate) struct DmaSeg {
    pub(crate) addr: u64,
    pub(crate) len: u32,
    pub(crate) status: u8,
    pub(crate) p2p: u8,
}

extern "C" {
    pub(crate) static nva_iod_cmd_offset: usize;
    pub(crate) static nva_iod_rust_offset: usize;
    pub(crate) static nva_state_new: c_int;
    pub(crate) static nva_state_live: c_int;
    pub(crate) static nva_state_resetting: c_int;
    pub(crate) static nva_state_connecting: c_int;
    pub(crate) static nva_state_deleting: c_int;
    pub(crate) static nva_state_deleting_noio: c_int;
    pub(crate) static nva_state_dead: c_int;

    pub(crate) static nva_quirk_qdepth_one: c_ulong;
    pub(crate) static nva_quirk_shared_tags: c_ulong;
    pub(crate) static nva_quirk_128_bytes_sqes: c_ulong;
    pub(crate) static nva_quirk_single_vector: c_ulong;
    pub(crate) static nva_quirk_broken_msi: c_ulong;
    pub(crate) static nva_quirk_medium_prio_sq: c_ulong;
    pub(crate) static nva_quirk_dma_address_bits_48: c_ulong;
    pub(crate) static nva_quirk_dmapool_align_512: c_ulong;
    pub(crate) static nva_quirk_simple_suspend: c_ulong;
    #[cfg(CONFIG_FAULT_INJECTION_DEBUG_FS)]
    pub(crate) static nva_quirk_skip_cid_gen: c_ulong;

    pub(crate) static nva_aq_depth: c_uint;
    pub(crate) static nva_aq_blk_mq_depth: c_uint;
    pub(crate) static nva_hctx_type_default: c_uint;
    pub(crate) static nva_hctx_type_read: c_uint;
    pub(crate) static nva_hctx_type_poll: c_uint;
    pub(crate) static nva_p2p_none: c_uint;
    pub(crate) static nva_p2p_bus_addr: c_uint;
    pub(crate) static nva_p2p_thru_host_bridge: c_uint;
    pub(crate) static nva_ers_can_recover: c_uint;
    pub(crate) static nva_ers_need_reset: c_uint;
    pub(crate) static nva_ers_disconnect: c_uint;
    pub(crate) static nva_ers_recovered: c_uint;
    pub(crate) static nva_channel_normal: c_uint;
    pub(crate) static nva_channel_frozen: c_uint;
    pub(crate) static nva_sts_ioerr: u8;
    pub(crate) static nva_sts_resource: u8;
    pub(crate) static nva_sts_again: u8;

    pub(crate) fn nva_ctrl_alloc(pdev: *mut pci_dev) -> *mut NvaCtrl;
    pub(crate) fn nva_ctrl_free_unused(c: *mut NvaCtrl);
    pub(crate) fn nva_ctrl_set_transport(c: *mut NvaCtrl, t: *mut c_void);
    pub(crate) fn nva_ctrl_init(c: *mut NvaCtrl, quirks: c_ulong) -> c_int;
    pub(crate) fn nva_ctrl_add(c: *mut NvaCtrl) -> c_int;
    pub(crate) fn nva_ctrl_uninit(c: *mut NvaCtrl);
    pub(crate) fn nva_ctrl_put(c: *mut NvaCtrl);
    pub(crate) fn nva_ctrl_publish(c: *mut NvaCtrl);
    pub(crate) fn nva_ctrl_unpublish(c: *mut NvaCtrl);
    pub(crate) fn nva_ctrl_device(c: *mut NvaCtrl) -> *mut device;
    pub(crate) fn nva_ctrl_instance(c: *mut NvaCtrl) -> c_int;
    pub(crate) fn nva_ctrl_state(c: *mut NvaCtrl) -> c_int;
    pub(crate) fn nva_ctrl_change_state(c: *mut NvaCtrl, state: c_int) -> bool;
    pub(crate) fn nva_ctrl_state_terminal(c: *mut NvaCtrl) -> bool;
    pub(crate) fn nva_ctrl_quirks(c: *mut NvaCtrl) -> c_ulong;
    pub(crate) fn nva_ctrl_set_cap(c: *mut NvaCtrl, cap: u64);
    pub(crate) fn nva_ctrl_set_queue_count_field(c: *mut NvaCtrl, n: u32);
    pub(crate) fn nva_ctrl_set_sqsize(c: *mut NvaCtrl, sqsize: u16);
    pub(crate) fn nva_ctrl_set_limits(
        c: *mut NvaCtrl,
        max_hw_sectors: u32,
        max_segments: u32,
        max_integrity_segments: u32,
    );
    pub(crate) fn nva_ctrl_set_max_integrity_segments(c: *mut NvaCtrl, n: u32);
    pub(crate) fn nva_ctrl_set_numa_node(c: *mut NvaCtrl, node: c_int);
    pub(crate) fn nva_ctrl_set_cmb_registers(c: *mut NvaCtrl, cmbloc: u32, cmbsz: u32);
    pub(crate) fn nva_ctrl_host_memory_wanted(
        c: *mut NvaCtrl,
        hmpre: *mut u32,
        hmmin: *mut u32,
        hmminds: *mut u32,
        hmmaxd: *mut u16,
    );
    pub(crate) fn nva_ctrl_set_hmb(c: *mut NvaCtrl, enabled: bool);
    pub(crate) fn nva_ctrl_update_attrs(c: *mut NvaCtrl);
    pub(crate) fn nva_ctrl_enabled(c: *mut NvaCtrl) -> bool;
    pub(crate) fn nva_ctrl_shut_down(c: *mut NvaCtrl) -> bool;
    pub(crate) fn nva_ctrl_dbbuf_supported(c: *mut NvaCtrl) -> bool;
    pub(crate) fn nva_ctrl_sgl_supported(c: *mut NvaCtrl) -> bool;
    pub(crate) fn nva_ctrl_meta_sgl_supported(c: *mut NvaCtrl) -> bool;
    pub(crate) fn nva_ctrl_npss(c: *mut NvaCtrl) -> u8;
    pub(crate) fn nva_ctrl_clear_npss(c: *mut NvaCtrl);
    pub(crate) fn nva_ctrl_admin_timeout(c: *mut NvaCtrl) -> c_ulong;
    pub(crate) fn nva_ctrl_has_io_tagset(c: *mut NvaCtrl) -> bool;
    pub(crate) fn nva_ctrl_io_tagset_maps(c: *mut NvaCtrl) -> c_uint;
    pub(crate) fn nva_ctrl_has_admin_queue(c: *mut NvaCtrl) -> bool;
    pub(crate) fn nva_ctrl_admin_queue_usable(c: *mut NvaCtrl) -> bool;
    pub(crate) fn nva_ctrl_enable(c: *mut NvaCtrl) -> c_int;
    pub(crate) fn nva_ctrl_disable(c: *mut NvaCtrl, shutdown: bool) -> c_int;
    pub(crate) fn nva_ctrl_init_finish(c: *mut NvaCtrl, was_suspended: bool) -> c_int;
    pub(crate) fn nva_ctrl_start(c: *mut NvaCtrl);
    pub(crate) fn nva_ctrl_stop(c: *mut NvaCtrl);
    pub(crate) fn nva_ctrl_flush_scan(c: *mut NvaCtrl);
    pub(crate) fn nva_ctrl_flush_reset(c: *mut NvaCtrl);
    pub(crate) fn nva_ctrl_wait_reset(c: *mut NvaCtrl) -> bool;
    pub(crate) fn nva_ctrl_try_sched_reset(c: *mut NvaCtrl) -> c_int;
    pub(crate) fn nva_ctrl_start_freeze(c: *mut NvaCtrl);
    pub(crate) fn nva_ctrl_wait_freeze(c: *mut NvaCtrl);
    pub(crate) fn nva_ctrl_wait_freeze_timeout(c: *mut NvaCtrl) -> c_int;
    pub(crate) fn nva_ctrl_unfreeze(c: *mut NvaCtrl);
    pub(crate) fn nva_ctrl_quiesce_io(c: *mut NvaCtrl);
    pub(crate) fn nva_ctrl_unquiesce_io(c: *mut NvaCtrl);
    pub(crate) fn nva_ctrl_quiesce_admin(c: *mut NvaCtrl);
    pub(crate) fn nva_ctrl_unquiesce_admin(c: *mut NvaCtrl);
    pub(crate) fn nva_ctrl_sync_queues(c: *mut NvaCtrl);
    pub(crate) fn nva_ctrl_mark_namespaces_dead(c: *mut NvaCtrl);
    pub(crate) fn nva_ctrl_remove_namespaces(c: *mut NvaCtrl);
    pub(crate) fn nva_ctrl_cancel_tagset(c: *mut NvaCtrl);
    pub(crate) fn nva_ctrl_cancel_admin_tagset(c: *mut NvaCtrl);
    pub(crate) fn nva_ctrl_set_queue_count(c: *mut NvaCtrl, count: *mut c_int) -> c_int;
    pub(crate) fn nva_ctrl_get_features(c: *mut NvaCtrl, fid: c_uint, result: *mut u32) -> c_int;
    pub(crate) fn nva_ctrl_set_features(c: *mut NvaCtrl, fid: c_uint, value: u32) -> c_int;
    pub(crate) fn nva_ctrl_submit_sync(c: *mut NvaCtrl, cmd: *const c_void) -> c_int;
    pub(crate) fn nva_ctrl_complete_aen(c: *mut NvaCtrl, status: u16, result: u64);
    pub(crate) fn nva_is_aen_cid(qid: u16, cid: u16) -> bool;
    pub(crate) fn nva_ctrl_abort_limit_take(c: *mut NvaCtrl) -> bool;
    pub(crate) fn nva_ctrl_abort_limit_put(c: *mut NvaCtrl);

    pub(crate) fn nva_alloc_admin_tag_set(c: *mut NvaCtrl, rust_iod_size: usize) -> c_int;
    pub(crate) fn nva_remove_admin_tag_set(c: *mut NvaCtrl);
    pub(crate) fn nva_alloc_io_tag_set(
        c: *mut NvaCtrl,
        nr_maps: c_uint,
        rust_iod_size: usize,
    ) -> c_int;
    pub(crate) fn nva_remove_io_tag_set(c: *mut NvaCtrl);
    pub(crate) fn nva_update_nr_hw_queues(c: *mut NvaCtrl, nr: c_uint);
    pub(crate) fn nva_map_set(
        set: *mut blk_mq_tag_set,
        kind: c_uint,
        nr_queues: c_uint,
        queue_offset: c_uint,
    ) -> c_int;
    pub(crate) fn nva_map_count(set: *mut blk_mq_tag_set) -> c_uint;
    pub(crate) fn nva_map_hw_queues(
        c: *mut NvaCtrl,
        set: *mut blk_mq_tag_set,
        kind: c_uint,
        vector_offset: c_uint,
    );
    pub(crate) fn nva_map_queues_plain(set: *mut blk_mq_tag_set, kind: c_uint);
    pub(crate) fn nva_find_rq(tags: *mut blk_mq_tags, cid: u16) -> *mut request;
    pub(crate) fn nva_try_complete_req(rq: *mut request, status: u16, result: u64) -> bool;
    pub(crate) fn nva_add_to_batch(rq: *mut request, iob: *mut io_comp_batch) -> bool;
    pub(crate) fn nva_end_batch(iob: *mut io_comp_batch);
    pub(crate) fn nva_complete_rq(rq: *mut request);
    pub(crate) fn nva_trace_sq(rq: *mut request, sq_head: u16, sq_tail: *const i16);
    pub(crate) fn nva_rq_list_pop(list: *mut rq_list) -> *mut request;
    pub(crate) fn nva_rq_list_add_tail(list: *mut rq_list, rq: *mut request);
    pub(crate) fn nva_rq_list_init(list: *mut rq_list);
    pub(crate) fn nva_rq_queue(rq: *mut request) -> *mut c_void;
    pub(crate) fn nva_rq_transport(rq: *mut request) -> *mut c_void;
    pub(crate) fn nva_rq_check_ready(rq: *mut request) -> bool;
    pub(crate) fn nva_rq_fail_nonready(rq: *mut request) -> u8;
    pub(crate) fn nva_rq_fail_host_path(rq: *mut request);
    pub(crate) fn nva_rq_setup_cmd(rq: *mut request) -> u8;
    pub(crate) fn nva_rq_cleanup_cmd(rq: *mut request);
    pub(crate) fn nva_rq_start(rq: *mut request);
    pub(crate) fn nva_rq_cid(rq: *mut request) -> u16;
    pub(crate) fn nva_rq_opcode(rq: *mut request) -> u8;
    pub(crate) fn nva_rq_op_name(rq: *mut request) -> *const c_char;
    pub(crate) fn nva_rq_bytes(rq: *mut request) -> c_uint;
    pub(crate) fn nva_rq_payload_bytes(rq: *mut request) -> c_uint;
    pub(crate) fn nva_rq_nr_phys_segments(rq: *mut request) -> u16;
    pub(crate) fn nva_rq_nr_integrity_segments(rq: *mut request) -> u16;
    pub(crate) fn nva_rq_has_integrity(rq: *mut request) -> bool;
    pub(crate) fn nva_rq_is_user_cmd(rq: *mut request) -> bool;
    pub(crate) fn nva_rq_retries(rq: *mut request) -> u8;
    pub(crate) fn nva_rq_mark_cancelled(rq: *mut request);
    pub(crate) fn nva_rq_mark_aborted(rq: *mut request);
    pub(crate) fn nva_rq_aborted(rq: *mut request) -> bool;
    pub(crate) fn nva_rq_gaps_within_page(rq: *mut request) -> bool;
    pub(crate) fn nva_rq_in_flight(rq: *mut request) -> bool;
    pub(crate) fn nva_submit_abort(c: *mut NvaCtrl, rq: *mut request, sqid: u16) -> c_int;
    pub(crate) fn nva_submit_delete_queue(c: *mut NvaCtrl, opcode: u8, qid: u16) -> c_int;

    pub(crate) fn nva_map_first_bvec(
        rq: *mut request,
        dev: *mut device,
        max_end: u32,
        seg: *mut DmaSeg,
    ) -> u8;
    pub(crate) fn nva_unmap_page(rq: *mut request, dev: *mut device, addr: u64, len: u32);
    pub(crate) fn nva_dma_iter_start(rq: *mut request, dev: *mut device, seg: *mut DmaSeg) -> bool;
    pub(crate) fn nva_dma_iter_next(rq: *mut request, dev: *mut device, seg: *mut DmaSeg) -> bool;
    pub(crate) fn nva_dma_coalesced(rq: *mut request) -> bool;
    pub(crate) fn nva_dma_need_unmap_each(rq: *mut request, dev: *mut device, p2p: u8) -> bool;
    pub(crate) fn nva_dma_unmap(rq: *mut request, dev: *mut device, len: usize, p2p: u8) -> bool;
    pub(crate) fn nva_dma_unmap_phys(
        rq: *mut request,
        dev: *mut device,
        addr: u64,
        len: u32,
        p2p: u8,
    );
    pub(crate) fn nva_meta_iter_start(rq: *mut request, dev: *mut device, seg: *mut DmaSeg)
        -> bool;
    pub(crate) fn nva_meta_iter_next(rq: *mut request, dev: *mut device, seg: *mut DmaSeg) -> bool;
    pub(crate) fn nva_meta_coalesced(rq: *mut request) -> bool;
    pub(crate) fn nva_meta_unmap(rq: *mut request, dev: *mut device, len: usize, p2p: u8) -> bool;
    pub(crate) fn nva_rq_integrity_bvec(rq: *mut request, len: *mut u32, p2p: *mut bool);
    pub(crate) fn nva_map_integrity_bvec(
        rq: *mut request,
        dev: *mut device,
        addr: *mut u64,
    ) -> bool;
    pub(crate) fn nva_vec_pool_create(size: usize, node: c_int) -> *mut mempool_t;
    pub(crate) fn nva_vec_pool_alloc(pool: *mut mempool_t) -> *mut c_void;
    pub(crate) fn nva_vec_pool_free(pool: *mut mempool_t, p: *mut c_void);
    pub(crate) fn nva_vec_pool_destroy(pool: *mut mempool_t);
    pub(crate) fn nva_dma_pool_create(
        name: *const c_char,
        pdev: *mut pci_dev,
        size: usize,
        align: usize,
        node: c_int,
    ) -> *mut dma_pool;
    pub(crate) fn nva_dma_pool_alloc(pool: *mut dma_pool, dma: *mut u64) -> *mut c_void;

    pub(crate) fn nva_alloc_irq_vectors(
        pdev: *mut pci_dev,
        max: c_uint,
        spread: bool,
        msi_ok: bool,
        write_queues: c_uint,
        read_queues: *mut c_uint,
    ) -> c_int;
    pub(crate) fn nva_pci_is_enabled(pdev: *mut pci_dev) -> bool;
    pub(crate) fn nva_pci_msix_enabled(pdev: *mut pci_dev) -> bool;
    pub(crate) fn nva_pci_channel_offline(pdev: *mut pci_dev) -> bool;
    pub(crate) fn nva_pci_error_state_normal(pdev: *mut pci_dev) -> bool;
    pub(crate) fn nva_pci_disconnected(pdev: *mut pci_dev) -> bool;
    pub(crate) fn nva_possible_queues() -> c_uint;
    pub(crate) fn nva_pci_name(pdev: *mut pci_dev) -> *const c_char;
    pub(crate) fn nva_pci_discard_saved_state(pdev: *mut pci_dev);
    pub(crate) fn nva_pci_numa_node(pdev: *mut pci_dev) -> c_int;
    pub(crate) fn nva_nr_node_ids() -> c_uint;
    pub(crate) fn nva_pci_keeps_context_in_suspend(pdev: *mut pci_dev) -> bool;
    pub(crate) fn nva_pci_bar_start(pdev: *mut pci_dev, bar: c_uint) -> u64;
    pub(crate) fn nva_pci_bar_len(pdev: *mut pci_dev, bar: c_uint) -> u64;
    pub(crate) fn nva_pci_bar_bus_address(pdev: *mut pci_dev, bar: c_uint) -> u64;
    pub(crate) fn nva_memremap_compat_align() -> c_ulong;
    pub(crate) fn nva_p2pdma_add_resource(
        pdev: *mut pci_dev,
        bar: c_uint,
        size: u64,
        offset: u64,
    ) -> c_int;
    pub(crate) fn nva_p2pmem_publish(pdev: *mut pci_dev, publish: bool);
    pub(crate) fn nva_p2pmem_alloc(pdev: *mut pci_dev, size: usize, bus: *mut u64) -> *mut c_void;
    pub(crate) fn nva_p2pmem_free(pdev: *mut pci_dev, p: *mut c_void, size: usize);
    pub(crate) fn nva_dma_alloc_device_only(
        pdev: *mut pci_dev,
        size: usize,
        dma: *mut u64,
    ) -> *mut c_void;
    pub(crate) fn nva_dma_free_device_only(
        pdev: *mut pci_dev,
        size: usize,
        p: *mut c_void,
        dma: u64,
    );
    pub(crate) fn nva_dma_alloc_merged(
        pdev: *mut pci_dev,
        size: usize,
        dma: *mut u64,
    ) -> *mut sg_table;
    pub(crate) fn nva_dma_free_merged(pdev: *mut pci_dev, size: usize, sgt: *mut sg_table);
    pub(crate) fn nva_dma_merge_boundary(pdev: *mut pci_dev) -> c_ulong;
    pub(crate) fn nva_max_block_size() -> u64;
    pub(crate) fn nva_dma_opt_mapping_size(pdev: *mut pci_dev) -> u64;
    pub(crate) fn nva_dma_setup(
        pdev: *mut pci_dev,
        mask_bits: c_uint,
        min_align_mask: c_uint,
    ) -> c_int;
    pub(crate) fn nva_reinit_completion(x: *mut completion);

    pub(crate) fn nva_cpuhp_register() -> c_int;
    pub(crate) fn nva_cpuhp_unregister();
    pub(crate) fn nva_ctrl_watch_cpus(c: *mut NvaCtrl) -> c_int;
    pub(crate) fn nva_ctrl_unwatch_cpus(c: *mut NvaCtrl);
    pub(crate) fn nva_register_driver() -> c_int;
    pub(crate) fn nva_unregister_driver();
}
