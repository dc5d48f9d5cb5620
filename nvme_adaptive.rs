// SPDX-License-Identifier: GPL-2.0

//! The PCI transport: what `drivers/nvme/host/pci.c` does for nvme-core, with per-queue
//! adaptive polling. nvme-core owns the controller state machine, identify, namespaces,
//! character devices, passthrough, sysfs, hwmon and asynchronous events; this file brings the
//! PCI function and the queues up and down around it: probe, reset, disable, removal,
//! shutdown, timeouts, PCI error recovery and power management.
//!
//! Each function says which of `pci.c` it follows. `dev` (a mutex) is pci.c's
//! `shutdown_lock`: it orders enabling, queue setup and disabling.

use kernel::{
    debugfs,
    device::{
        Bound,
        Core,
        Device, //
    },
    dma::Coherent,
    fmt,
    io::{
        io_project,
        Io, //
    },
    new_mutex,
    page::PAGE_SIZE,
    pci::Device as PciDevice,
    prelude::*,
    str::CString,
    sync::{
        atomic::{
            Atomic,
            Relaxed, //
        },
        barrier::{
            mb,
            Full, //
        },
        Arc,
        Mutex,
        MutexGuard, //
    }, //
};

use crate::{
    cmb::{
        self,
        cmbsz, //
    },
    cmd::{
        Command,
        HostMemoryDescriptor,
        HOST_MEMORY_UNIT, //
    },
    hmb,
    mapping::{
        self,
        Iod,
        NodePools,
        Pools,
        MAX_META_SEGMENTS,
        MAX_SEGMENTS,
        PAGE, //
    },
    params::{
        self,
        MAX_BYTES, //
    },
    queue::{
        Hw,
        Queue,
        ShadowDoorbells, //
    },
    regs::{
        self,
        csts, //
    },
    stats::QueueStats,
    sys::{
        blk::{
            Batch,
            InFlight,
            LocalRqList,
            MapKind,
            QueueMaps,
            Rejected,
            Request,
            RqList,
            TagSetTypes,
            Tags, //
        },
        debugfs as module_debugfs,
        dma::{
            max_block_size,
            DeviceMemory,
            Unbindable, //
        },
        numa::{
            pin_init_on,
            Node, //
        },
        nvme::{
            self,
            Ctrl,
            Feature,
            Quirk,
            Quirks,
            State, //
        },
        pci::{
            memremap_alignment,
            ChannelState,
            ErsResult,
            Function,
            Regs, //
        },
        Transport, //
    }, //
};

/// The admin queue's depth.
fn admin_depth() -> u16 {
    nvme::admin_queue_depth()
}

/// The queue layout blk-mq maps CPUs to; read by `map_queues`, which may run under `dev`.
struct Layout {
    /// Interrupt vectors: the admin queue's, then one per interrupt-driven I/O queue.
    vectors: Atomic<u32>,
    /// Interrupt-driven I/O queues for writes, and for reads too without read queues.
    default: Atomic<u32>,
    /// Interrupt-driven I/O queues for reads (`write_queues`), after the default ones.
    read: Atomic<u32>,
    /// I/O queues without interrupts, for polled I/O.
    poll: Atomic<u32>,
}

/// I/O queues to ask for (`nvme_max_io_queues`): one if the controller shares tags with the
/// admin queue.
fn max_io_queues(shared_tags: bool, write: u32, poll: u32) -> u32 {
    if shared_tags {
        1
    } else {
        nvme::possible_queues() + write + poll
    }
}

/// What `dev` guards.
struct DevState {
    /// Entries per I/O queue.
    depth: u16,
    /// Doorbell stride, in 4-byte units.
    stride: u32,
    /// Queues created on the controller and enabled.
    online: u32,
    /// Highest I/O queue id wanted.
    max_qid: u32,
    /// The controller supports NVM subsystem reset.
    subsystem: bool,
    shadow: Option<Arc<ShadowDoorbells>>,
    /// Bytes of it registered as peer-to-peer memory (0: none, so far).
    cmb_size: u64,
    /// I/O submission queues go in the CMB.
    cmb_use_sqes: bool,
}

/// The host memory buffer lent to the controller (`pci.c`'s `host_mem_*` fields).
#[derive(Default)]
struct HostMemory {
    /// The descriptor list, as the controller reads it.
    descs: Option<Coherent<[HostMemoryDescriptor]>>,
    chunks: KVec<DeviceMemory>,
    /// Bytes in the chunks.
    size: u64,
    /// The controller was last told to use it (`hmb` in sysfs).
    enabled: bool,
    /// The controller is going: nothing is allocated any more.
    removed: bool,
}

/// The debugfs directory of a controller: one file per queue (and, with fault injection, one
/// knob per queue).
struct StatsFiles {
    _files: KVec<Pin<KBox<debugfs::File<Arc<QueueStats>>>>>,
    _dir: debugfs::Dir,
}

fn show_stats(stats: &Arc<QueueStats>, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    stats.show(f)
}

/// `inject_duplicates`: the next N completions of the queue are handled twice.
#[cfg(CONFIG_FAULT_INJECTION_DEBUG_FS)]
fn set_duplicates(stats: &Arc<QueueStats>, input: &mut kernel::uaccess::UserSliceReader) -> Result {
    let mut buf = [0u8; 16];
    let len = input.len().min(buf.len());
    input.read_slice(&mut buf[..len])?;
    let n = core::str::from_utf8(&buf[..len])
        .ok()
        .and_then(|s| s.trim().parse::<u32>().ok())
        .ok_or(EINVAL)?;
    stats.duplicates_to_inject.set(n.into());
    Ok(())
}

/// One NVMe controller on PCI.
#[pin_data(PinnedDrop)]
pub(crate) struct Controller {
    /// Queue pairs by id, 0 the admin queue; all made at probe, freed with the controller.
    queues: KVec<Pin<KBox<Queue>>>,
    hw: Arc<Hw>,
    #[pin]
    dev: Mutex<DevState>,
    layout: Layout,
    subsystem: Atomic<bool>,
    /// Power state saved by a system suspend (`u32::MAX`: none).
    last_power_state: Atomic<u32>,
    #[pin]
    stats: Mutex<Option<StatsFiles>>,
    /// Held while a NUMA node's DMA pools are made (blk-mq sets queues up in parallel).
    #[pin]
    making_pools: Mutex<()>,
    /// Taken around admin commands: not `dev`, which a timeout's disable takes.
    #[pin]
    hmb: Mutex<HostMemory>,
}

impl Controller {
    fn pci(&self) -> &Function {
        &self.hw.pci
    }

    fn admin(&self) -> &Queue {
        &self.queues[0]
    }

    /// Queues with rings (`ctrl.queue_count`).
    fn allocated(&self) -> impl Iterator<Item = &Pin<KBox<Queue>>> {
        self.queues.iter().take_while(|q| q.has_rings())
    }

    /// Frees the I/O tag set, after the I/O queues forgot its tags: a completion that still
    /// came would otherwise look a request up in freed memory.
    fn remove_io_tag_set(&self) {
        for q in self.queues.iter().skip(1) {
            q.set_tags(Tags::none());
        }
        self.core().remove_io_tag_set();
    }

    /// Tells nvme-core how many queues have memory.
    fn count_allocated(&self) {
        self.core()
            .set_allocated_queues(self.allocated().count() as u32);
    }

    fn online(&self) -> u32 {
        self.dev.lock().online
    }

    /// Follows `nvme_pci_enable`: enables the function, reads CAP, takes one vector for the
    /// admin queue, and brings the admin queue up.
    fn enable(&self, st: &mut DevState) -> Result {
        let pci = self.pci();
        pci.enable_mem().map_err(|_| ENOMEM)?;
        pci.set_master();
        let result = self.enable_admin(st);
        if result.is_err() {
            pci.free_irq_vectors();
            pci.disable();
        }
        result
    }

    fn enable_admin(&self, st: &mut DevState) -> Result {
        let (core, pci, regs) = (self.core(), self.pci(), &self.hw.regs);
        if regs.read32(regs::CSTS)? == u32::MAX {
            return Err(ENODEV);
        }
        // Whatever the controller supports, one vector for the admin queue during init.
        pci.alloc_irq_vectors(1, !core.has_quirk(Quirk::BrokenMsi))?;
        let cap = regs.read64(regs::CAP)?;
        core.set_cap(cap);
        st.depth = self.io_depth(cap);
        st.stride = regs::cap::doorbell_stride(cap);
        core.set_sqsize(st.depth - 1);
        self.map_cmb(st, cap)?;
        pci.save_state();
        self.configure_admin_queue(st, cap)
    }

    /// The I/O queue depth for this controller, from `io_queue_depth` as it is at this enable
    /// (`nvme_pci_enable`). As there, it sizes the queues allocated from now on and the tag set
    /// made next; queues that keep their rings keep their depth, and the tag set its own.
    fn io_depth(&self, cap: u64) -> u16 {
        let core = self.core();
        let mut depth = (regs::cap::mqes(cap) + 1).min(params::io_queue_depth());
        if core.has_quirk(Quirk::QueueDepthOne) {
            depth = 2;
        } else if self.pci().vendor_id() == 0x144d
            && matches!(self.pci().device_id(), 0xa821 | 0xa822)
            && regs::cap::mqes(cap) == 0
        {
            depth = 64;
            dev_err!(
                core.device(),
                "detected PM1725 NVMe controller, set queue depth={}\n",
                depth
            );
        }
        if core.has_quirk(Quirk::SharedTags) && depth < u32::from(admin_depth()) + 2 {
            depth = u32::from(admin_depth()) + 2;
            dev_warn!(core.device(), "IO queue depth clamped to {}\n", depth);
        }
        depth as u16
    }

    /// Follows `nvme_map_cmb`: finds the controller memory buffer, gives its registers to
    /// sysfs, and registers it as peer-to-peer memory (for I/O submission queues with
    /// `use_cmb_sqes`, and for other drivers if it takes data), once: that lasts until unbind.
    /// Without `CONFIG_PCI_P2PDMA` the registration fails as the stock driver's does: sysfs
    /// shows the CMB, nothing uses it, and the next enable tries again.
    fn map_cmb(&self, st: &mut DevState, cap: u64) -> Result {
        let (core, pci, regs) = (self.core(), self.pci(), &self.hw.regs);
        if st.cmb_size != 0 {
            return Ok(());
        }
        if regs::cap::cmbs(cap) {
            regs.write32(regs::CMBMSC, cmb::CMBMSC_CRE as u32)?;
        }
        let cmbsz = regs.read32(regs::CMBSZ)?;
        if cmbsz == 0 {
            return Ok(());
        }
        let cmb = cmb::Registers {
            cmbloc: regs.read32(regs::CMBLOC)?,
            cmbsz,
        };
        core.set_cmb_registers(cmb.cmbloc, cmb.cmbsz);
        let bar = cmb.bar();
        let Some((offset, size)) = cmb.in_bar(pci.bar_len(bar)) else {
            return Ok(());
        };
        let align = memremap_alignment();
        if size % align != 0 || pci.bar_start(bar) % align != 0 {
            return Ok(());
        }
        // Where the host sees the CMB, and decoding on (the NVMe 1.4 scheme).
        if regs::cap::cmbs(cap) {
            let base = pci.bar_bus_address(bar).wrapping_add(offset);
            regs.write64_hi_lo(regs::CMBMSC, cmb::CMBMSC_CRE | cmb::CMBMSC_CMSE | base)?;
        }
        if pci.add_p2p_memory(bar, size, offset).is_err() {
            dev_warn!(core.device(), "failed to register the CMB\n");
            regs.write64_hi_lo(regs::CMBMSC, 0)?;
            return Ok(());
        }
        st.cmb_size = size;
        st.cmb_use_sqes = params::use_cmb_sqes() && cmb.supports(cmbsz::SQS);
        if cmb.supports(cmbsz::WDS | cmbsz::RDS) {
            pci.publish_p2p_memory(true);
        }
        Ok(())
    }

    /// Follows `nvme_pci_configure_admin_queue`.
    fn configure_admin_queue(&self, st: &mut DevState, cap: u64) -> Result {
        let (core, pci, regs) = (self.core(), self.pci(), &self.hw.regs);
        if regs.size() < regs::bar_size_for(0, st.stride) {
            return Err(ENOMEM);
        }
        st.subsystem = regs.read32(regs::VS)? >= regs::VS_1_1 && regs::cap::nssrs(cap);
        self.subsystem.store(st.subsystem, Relaxed);
        if st.subsystem && regs.read32(regs::CSTS)? & csts::NSSRO != 0 {
            regs.write32(regs::CSTS, csts::NSSRO)?;
        }
        // A controller handed over enabled is only disabled: a shutdown notification could
        // make it complete admin commands into memory we know nothing about.
        if core.disable(false).is_err() {
            // No CSTS.RDY transition: try the bigger hammer, then again.
            pci.reset_flr()?;
            pci.restore_state();
            core.disable(false)?;
            dev_info!(core.device(), "controller reset completed after pcie flr\n");
        }
        core.set_numa_node(pci.numa_node());
        let admin = self.admin();
        let (sq, cq) = admin.ring_dma().ok_or(ENOMEM)?;
        let entries = u32::from(admin.depth()) - 1;
        regs.write32(regs::AQA, entries | entries << 16)?;
        regs.write64(regs::ASQ, sq)?;
        regs.write64(regs::ACQ, cq)?;
        core.enable()?;
        admin.init(st.stride, None);
        st.online += 1;
        if let Err(e) = self.request_irq(0, 0, false) {
            st.online -= 1;
            let _ = core.disable(false);
            return Err(e);
        }
        admin.set_enabled(true);
        Ok(())
    }

    /// Requests the interrupt of `vector` for queue `qid`.
    fn request_irq(&self, qid: usize, vector: u32, own: bool) -> Result {
        let irq = self.pci().irq_vector(vector)?;
        self.queues[qid].as_ref().request_irq(
            crate::sys::irq::Irq::new(irq),
            own && self.pci().msix_enabled(),
        )
    }

    /// Takes `dev` while queues are being set up, unless a disable holds it or the controller
    /// left the connecting state (`nvme_setup_io_queues_trylock`).
    fn setup_lock(&self) -> Result<MutexGuard<'_, DevState>> {
        let st = self.dev.try_lock().ok_or(ENODEV)?;
        if self.core().state() != State::Connecting {
            return Err(ENODEV);
        }
        Ok(st)
    }

    /// Follows `nvme_setup_io_queues`: asks the controller for queues, allocates vectors with
    /// managed affinity, creates the queues (fewer if that is what works). Queues without rings
    /// (at probe, or freed when a reset left fewer) get them on `dev`.
    fn setup_io_queues(&self, dev: &Device<Bound>) -> Result {
        let (core, pci) = (self.core(), self.pci());
        let admin = self.admin();
        let mut poll = params::poll_queues();
        let mut write = params::write_queues();
        // The tag set's maps are made once: no poll or read queues later without their map.
        if core.has_io_tag_set() {
            let maps = core.io_tag_set_maps();
            if maps < 3 {
                poll = 0;
            }
            if maps < 2 {
                write = 0;
            }
        }
        let allocated = self.queues.len() as u32 - 1;
        let shared_tags = core.has_quirk(Quirk::SharedTags);
        let wanted = max_io_queues(shared_tags, write, poll).min(allocated);
        let mut nr = core.set_queue_count(wanted)?;
        if nr == 0 {
            return Ok(());
        }
        let mut st = self.setup_lock()?;
        if admin.is_enabled() {
            admin.set_enabled(false);
            admin.free_irq();
        }
        if st.cmb_use_sqes {
            let entry = core::mem::size_of::<Command>() as u32;
            match cmb::sq_depth(st.depth, nr, entry, st.cmb_size, PAGE) {
                Some(depth) => {
                    st.depth = depth;
                    core.set_sqsize(depth - 1);
                }
                None => st.cmb_use_sqes = false,
            }
        }
        while regs::bar_size_for(nr, st.stride) > self.hw.regs.size() {
            nr -= 1;
            if nr == 0 {
                return Err(ENOMEM);
            }
        }
        loop {
            if admin.is_enabled() {
                admin.set_enabled(false);
                admin.free_irq();
            }
            pci.free_irq_vectors();
            let poll_queues = poll.min(nr - 1);
            let irq_queues = 1 + if core.has_quirk(Quirk::SingleVector) {
                0
            } else {
                nr - poll_queues
            };
            let (vectors, read) = pci
                .alloc_queue_vectors(irq_queues, !core.has_quirk(Quirk::BrokenMsi), write)
                .map_err(|_| EIO)?;
            // I/O queues with interrupts: a vector each, or all on the admin queue's.
            let irq_io_queues = vectors.saturating_sub(1).max(1);
            let default = irq_io_queues - read;
            self.layout.vectors.store(vectors, Relaxed);
            self.layout.default.store(default, Relaxed);
            self.layout.read.store(read, Relaxed);
            self.layout.poll.store(poll_queues, Relaxed);
            st.max_qid = irq_io_queues + poll_queues;
            self.request_irq(0, 0, false)?;
            admin.set_enabled(true);
            drop(st);

            self.create_io_queues(dev)?;
            let online = self.online();
            if online < 2 {
                return Ok(());
            }
            if online - 1 < self.dev.lock().max_qid {
                // Fewer queues than vectors: start over with what works.
                nr = online - 1;
                self.delete_io_queues(online);
                st = self.setup_lock()?;
                self.suspend_io_queues(&mut st);
                continue;
            }
            dev_info!(
                core.device(),
                "{}/{}/{} default/read/poll queues\n",
                default,
                read,
                poll_queues
            );
            return Ok(());
        }
    }

    /// Follows `nvme_create_io_queues`: allocates the rings missing and creates the queues the
    /// controller accepts. A failed Create command leaves fewer queues, not an error.
    fn create_io_queues(&self, dev: &Device<Bound>) -> Result {
        let (max_qid, depth, in_cmb) = {
            let st = self.dev.lock();
            (st.max_qid as usize, st.depth, st.cmb_use_sqes)
        };
        let wide = self.core().has_quirk(Quirk::Sqes128Bytes);
        let mut allocated = 0;
        for (qid, q) in self.queues.iter().enumerate().skip(1).take(max_qid) {
            if !q.has_rings() && q.alloc_rings(dev, depth, wide, in_cmb).is_err() {
                break;
            }
            allocated = qid;
        }
        self.count_allocated();
        let max = max_qid.min(allocated);
        let poll = self.layout.poll.load(Relaxed) as usize;
        let rw_queues = if max != 1 && poll > 0 {
            (self.layout.default.load(Relaxed) + self.layout.read.load(Relaxed)) as usize
        } else {
            max
        };
        for qid in (self.online() as usize)..=max {
            if !self.create_queue(qid, qid > rw_queues)? {
                break;
            }
        }
        Ok(())
    }

    /// Follows `nvme_create_queue`; false when the controller refused the queue.
    fn create_queue(&self, qid: usize, polled: bool) -> Result<bool> {
        let q = &self.queues[qid];
        let vectors = self.layout.vectors.load(Relaxed);
        let vector = if polled {
            None
        } else if vectors == 1 {
            Some(0)
        } else {
            Some(qid as u16)
        };
        if q.create_on_controller(vector)? != 0 {
            return Ok(false);
        }
        let mut st = self.setup_lock()?;
        q.init(st.stride, st.shadow.as_ref());
        st.online += 1;
        if let Some(v) = vector {
            if let Err(e) = self.request_irq(qid, v.into(), vectors > 1) {
                st.online -= 1;
                drop(st);
                self.delete_queue_now(q);
                return Err(e);
            }
        }
        q.resume_polling();
        q.set_enabled(true);
        Ok(true)
    }

    /// Deletes a queue pair on the controller and waits (probe error path). As
    /// `nvme_delete_io_queues`, the CQ is deleted only once its SQ is: the controller disable
    /// that follows cleans up after a controller that did not answer.
    fn delete_queue_now(&self, q: &Queue) {
        let timeout = self.core().admin_timeout();
        for delete_cq in [false, true] {
            if q.send_delete(delete_cq).is_err() || q.wait_deleted(timeout) == 0 {
                return;
            }
        }
    }

    /// Follows `__nvme_delete_io_queues`: sends Delete SQ (or CQ) for every online I/O queue
    /// and waits for them, all within one admin timeout. False if time ran out.
    fn delete_io_queues_pass(&self, online: u32, delete_cq: bool) -> bool {
        let mut left = online as usize - 1;
        let mut sent = 0;
        'send: loop {
            let mut timeout = self.core().admin_timeout();
            while left > 0 {
                if self.queues[left].send_delete(delete_cq).is_err() {
                    break;
                }
                left -= 1;
                sent += 1;
            }
            while sent > 0 {
                timeout = self.queues[left + sent].wait_deleted(timeout);
                if timeout == 0 {
                    return false;
                }
                sent -= 1;
                if left > 0 {
                    continue 'send;
                }
            }
            return true;
        }
    }

    /// Follows `nvme_delete_io_queues`: all SQs, then all CQs.
    fn delete_io_queues(&self, online: u32) {
        if online > 1 && self.delete_io_queues_pass(online, false) {
            self.delete_io_queues_pass(online, true);
        }
    }

    /// Follows `nvme_suspend_queue`: the queue takes no more commands and loses its
    /// interrupt.
    fn suspend_queue(&self, qid: usize, st: &mut DevState) {
        let q = &self.queues[qid];
        if !q.is_enabled() {
            return;
        }
        q.set_enabled(false);
        st.online = st.online.saturating_sub(1);
        if qid == 0 && self.core().has_admin_queue() {
            self.core().quiesce_admin();
        }
        q.stop_polling();
        q.free_irq();
    }

    fn suspend_io_queues(&self, st: &mut DevState) {
        for qid in (1..self.allocated().count()).rev() {
            self.suspend_queue(qid, st);
        }
    }

    /// Follows `nvme_pci_ctrl_is_dead`.
    fn is_dead(&self) -> bool {
        let pci = self.pci();
        if !pci.is_enabled() || !pci.is_present() || !pci.is_error_state_normal() {
            return true;
        }
        match self.hw.regs.read32(regs::CSTS) {
            Ok(v) => v & csts::CFS != 0 || v & csts::RDY == 0,
            Err(_) => true,
        }
    }

    /// Follows `nvme_dev_disable`: stops I/O, deletes the queues and disables (or shuts down)
    /// the controller unless it is dead, frees the interrupts, disables the function, and
    /// fails whatever is still in flight. A controller disabled this way may still be mid-DMA
    /// only if it ignored CC.EN, which bus mastering being off then stops.
    fn disable(&self, shutdown: bool) {
        let (core, pci) = (self.core(), self.pci());
        let state = core.state();
        let mut st = self.dev.lock();
        let dead = self.is_dead();
        if state == State::Live || state == State::Resetting {
            if pci.is_enabled() {
                core.start_freeze();
            }
            // A safe shutdown lets the entered requests finish.
            if !dead && shutdown {
                core.wait_freeze_timeout();
            }
        }
        core.quiesce_io();
        if !dead && self.admin().has_rings() {
            self.delete_io_queues(st.online);
            let _ = core.disable(shutdown);
            self.admin().reap_irqs_off();
        }
        self.suspend_io_queues(&mut st);
        self.suspend_queue(0, &mut st);
        pci.free_irq_vectors();
        if pci.is_enabled() {
            pci.disable();
        }
        // The last chance for a natural completion before the requests are cancelled.
        for q in self.allocated().skip(1) {
            q.reap_remaining();
        }
        for q in self.queues.iter() {
            q.close_completions();
        }
        core.cancel_tagset();
        core.cancel_admin_tagset();
        // Not starting up again: flush entered requests to their failed completion, so that
        // nothing waits on stopped queues (blk-mq's CPU hotplug handling would).
        if shutdown {
            core.unquiesce_io();
            if core.admin_queue_usable() {
                core.unquiesce_admin();
            }
        }
    }

    /// Follows `nvme_disable_prepare_reset`.
    fn disable_prepare_reset(&self, shutdown: bool) -> Result {
        if !self.core().wait_reset() {
            return Err(EBUSY);
        }
        self.disable(shutdown);
        Ok(())
    }

    /// Takes Identify's answers the transport uses (after `init_finish`).
    fn after_identify(&self) {
        self.hw.update_sgl_support();
        let n = if self.core().supports_meta_sgl() {
            MAX_META_SEGMENTS
        } else {
            1
        };
        self.core().set_max_integrity_segments(n);
    }

    /// Follows `nvme_dbbuf_dma_alloc`: shadow doorbells where the controller offers them
    /// (allocated once, cleared on every reset).
    fn prepare_shadow(&self, dev: &Device<Bound>) {
        let core = self.core();
        if !core.supports_dbbuf() {
            return;
        }
        let mut st = self.dev.lock();
        if let Some(s) = st.shadow.as_ref() {
            s.clear();
            return;
        }
        match ShadowDoorbells::new(dev, self.queues.len() as u32, st.stride)
            .and_then(|s| Arc::new(s, GFP_KERNEL).map_err(Into::into))
        {
            Ok(s) => st.shadow = Some(s),
            Err(_) => dev_warn!(core.device(), "unable to allocate dma for dbbuf\n"),
        }
    }

    /// Follows `nvme_dbbuf_set`: tells the controller where the shadow doorbells are; without
    /// them if it refuses. The buffers stay allocated, so that the next reset offers them
    /// again (`pci.c` frees them, and its reset allocates them anew).
    fn enable_shadow(&self) {
        let Some(shadow) = self.dev.lock().shadow.clone() else {
            return;
        };
        let (values, events) = shadow.dma();
        let cmd = Command::doorbell_buffer_config(values, events);
        if !matches!(self.core().submit_sync(&cmd), Ok(0)) {
            dev_warn!(self.core().device(), "unable to set dbbuf\n");
            for q in self.allocated().skip(1) {
                q.drop_shadow();
            }
        }
    }

    /// Follows `nvme_set_host_mem`: tells the controller to use the host memory buffer with
    /// `bits` (enable, return), or to stop (0). Returns the NVMe status.
    fn set_host_mem(&self, hm: &mut HostMemory, bits: u32) -> Result<u32> {
        let core = self.core();
        let descs = hm.descs.as_ref().map_or(0, Coherent::dma_address);
        let units = (hm.size / HOST_MEMORY_UNIT) as u32;
        let cmd = Command::set_host_memory(bits, units, descs, hm.chunks.len() as u32);
        let result = core.submit_sync(&cmd);
        let err = match result {
            Ok(0) => {
                hm.enabled = bits & hmb::ENABLE != 0;
                core.set_hmb_enabled(hm.enabled);
                return result;
            }
            Ok(status) => status as i32,
            Err(e) => e.to_errno(),
        };
        dev_warn!(
            core.device(),
            "failed to set host mem (err {}, flags {:#x}).\n",
            err,
            bits
        );
        result
    }

    /// Follows `nvme_free_host_mem`.
    fn free_host_mem(hm: &mut HostMemory) {
        hm.chunks.clear();
        hm.descs = None;
        hm.size = 0;
    }

    /// Follows `nvme_alloc_host_mem_single`: one chunk, which an IOMMU maps as one range.
    fn alloc_host_mem_single(&self, dev: &Device<Bound>, hm: &mut HostMemory, size: u64) -> Result {
        let chunk = DeviceMemory::alloc_merged(self.pci(), size as usize).ok_or(ENOMEM)?;
        let descs = Coherent::<HostMemoryDescriptor>::zeroed_slice(dev, 1, GFP_KERNEL)?;
        io_project!(descs, [try: 0]).copy_write(HostMemoryDescriptor::new(chunk.dma(), size));
        hm.chunks.push(chunk, GFP_KERNEL)?;
        hm.descs = Some(descs);
        hm.size = size;
        Ok(())
    }

    /// Follows `nvme_alloc_host_mem_multi`: chunks of `chunk` bytes, as many as can be had,
    /// up to `preferred` bytes or HMMAXD chunks.
    fn alloc_host_mem_multi(
        &self,
        dev: &Device<Bound>,
        hm: &mut HostMemory,
        preferred: u64,
        chunk: u64,
        hmmaxd: u16,
    ) -> Result {
        let mut plan = hmb::Plan::new(preferred, chunk, hmmaxd);
        let entries = plan.max_entries() as usize;
        let descs = Coherent::<HostMemoryDescriptor>::zeroed_slice(dev, entries, GFP_KERNEL)?;
        let mut chunks = KVec::with_capacity(entries, GFP_KERNEL)?;
        while let Some(len) = plan.next_len() {
            let Some(memory) = DeviceMemory::alloc(self.pci(), len as usize) else {
                break;
            };
            let Some(desc) = plan.add(memory.dma()) else {
                break;
            };
            io_project!(descs, [try: chunks.len()]).copy_write(desc);
            chunks.push(memory, GFP_KERNEL)?;
        }
        if plan.size() == 0 {
            return Err(ENOMEM);
        }
        hm.descs = Some(descs);
        hm.chunks = chunks;
        hm.size = plan.size();
        Ok(())
    }

    /// Follows `nvme_alloc_host_mem`: one range where an IOMMU merges pages, else chunks from
    /// the largest size down, until the buffer holds at least `min` bytes.
    fn alloc_host_mem(
        &self,
        dev: &Device<Bound>,
        hm: &mut HostMemory,
        wanted: hmb::Wanted,
        min: u64,
        preferred: u64,
    ) -> Result {
        let page = PAGE_SIZE as u64;
        let boundary = self.pci().dma_merge_boundary();
        if boundary != 0
            && page & boundary == 0
            && self.alloc_host_mem_single(dev, hm, preferred).is_ok()
        {
            return Ok(());
        }
        for chunk in wanted.chunk_sizes(preferred, page, max_block_size()) {
            if self
                .alloc_host_mem_multi(dev, hm, preferred, chunk, wanted.hmmaxd)
                .is_ok()
            {
                if hmb::enough(hm.size, min) {
                    return Ok(());
                }
                Self::free_host_mem(hm);
            }
        }
        Err(ENOMEM)
    }

    /// Follows `nvme_setup_host_mem`: lends the controller the host memory buffer Identify asks
    /// for, at most `max_host_mem_size_mb`, reusing the one it had if that is big enough (and
    /// telling it so). The controller works without one: failing to allocate it is no error.
    /// Returns the NVMe status of Set Features.
    fn setup_host_mem(&self, dev: &Device<Bound>) -> Result<u32> {
        let core = self.core();
        let (hmpre, hmmin, hmminds, hmmaxd) = core.host_memory_wanted();
        let wanted = hmb::Wanted {
            hmpre,
            hmmin,
            hmminds,
            hmmaxd,
        };
        let max_mib = params::max_host_mem_size_mb();
        let mut hm = self.hmb.lock();
        if hm.removed {
            return Err(ENODEV);
        }
        let (min, preferred) = match wanted.size(max_mib) {
            hmb::Size::None => return Ok(0),
            hmb::Size::MinimumAboveLimit { min } => {
                dev_warn!(
                    core.device(),
                    "min host memory ({} MiB) above limit ({} MiB).\n",
                    min >> 20,
                    max_mib
                );
                Self::free_host_mem(&mut hm);
                return Ok(0);
            }
            hmb::Size::Range { min, preferred } => (min, preferred),
        };
        let mut bits = hmb::ENABLE;
        if hm.descs.is_some() {
            if hm.size >= min {
                bits |= hmb::RETURN;
            } else {
                Self::free_host_mem(&mut hm);
            }
        }
        if hm.descs.is_none() {
            if self
                .alloc_host_mem(dev, &mut hm, wanted, min, preferred)
                .is_err()
            {
                dev_warn!(core.device(), "failed to allocate host memory buffer.\n");
                return Ok(0);
            }
            let n = hm.chunks.len();
            let plural = if n == 1 { "" } else { "s" };
            dev_info!(
                core.device(),
                "allocated {} MiB host memory buffer ({} segment{}).\n",
                hm.size >> 20,
                n,
                plural
            );
        }
        let result = self.set_host_mem(&mut hm, bits);
        if !matches!(result, Ok(0)) {
            Self::free_host_mem(&mut hm);
        }
        result
    }

    /// Follows `nvme_pci_nr_maps`.
    fn nr_maps(&self) -> u32 {
        if self.layout.poll.load(Relaxed) > 0 {
            3
        } else if self.layout.read.load(Relaxed) > 0 {
            2
        } else {
            1
        }
    }

    /// Follows `nvme_pci_update_nr_queues`; false when racing with a disable.
    fn update_nr_queues(&self) -> Result<bool> {
        let core = self.core();
        if !core.has_io_tag_set() {
            core.alloc_io_tag_set::<Self>(self.nr_maps())?;
            return Ok(true);
        }
        let Some(st) = self.dev.try_lock() else {
            return Ok(false);
        };
        if st.online == 0 {
            return Ok(false);
        }
        core.update_nr_hw_queues(st.online - 1);
        // Queues beyond the new count are not used any more.
        for q in self.queues.iter().skip(st.online as usize) {
            q.free_rings();
        }
        self.count_allocated();
        Ok(true)
    }

    /// Follows `nvme_dev_remove_admin`.
    fn remove_admin(&self) {
        let core = self.core();
        if core.admin_queue_usable() {
            // A reset during removal may have left user requests waiting on a stopped queue.
            core.unquiesce_admin();
            // The admin queue forgets the tags first, as the I/O queues do (`remove_io_tag_set`).
            if let Some(admin) = self.queues.first() {
                admin.set_tags(Tags::none());
            }
            core.remove_admin_tag_set();
        }
    }

    /// Frees what the controller used from memory: rings and shadow doorbells
    /// (`nvme_free_queues`, `nvme_dbbuf_dma_free`).
    fn free_memory(&self) {
        let shadow = self.dev.lock().shadow.take();
        drop(shadow);
        {
            let mut hm = self.hmb.lock();
            Self::free_host_mem(&mut hm);
            hm.removed = true;
        }
        for q in self.queues.iter() {
            q.free_rings();
        }
        self.count_allocated();
    }

    /// The probe stages after nvme-core registered the controller (`nvme_probe`).
    fn bring_up(&self, dev: &Device<Bound>) -> Result {
        let core = self.core();
        self.admin().alloc_rings(dev, admin_depth(), false, false)?;
        self.count_allocated();
        self.enable(&mut self.dev.lock())?;
        core.alloc_admin_tag_set::<Self>()?;
        // Connecting before admin commands, for the timeout handler.
        if !core.change_state(State::Connecting) {
            dev_warn!(core.device(), "failed to mark controller CONNECTING\n");
            return Err(EBUSY);
        }
        core.init_finish(false)?;
        self.after_identify();
        self.prepare_shadow(dev);
        self.setup_host_mem(dev)?;
        core.update_attrs();
        self.setup_io_queues(dev)?;
        if self.online() > 1 {
            core.alloc_io_tag_set::<Self>(self.nr_maps())?;
            self.enable_shadow();
        } else {
            dev_warn!(core.device(), "IO queues not created\n");
        }
        if !core.change_state(State::Live) {
            dev_warn!(core.device(), "failed to mark controller live state\n");
            return Err(ENODEV);
        }
        self.create_stats_files();
        core.watch_cpus()?;
        core.start();
        Ok(())
    }

    fn create_stats_files(&self) {
        let Some(root) = module_debugfs::root() else {
            return;
        };
        let files = (|| -> Result<StatsFiles> {
            let name = CString::try_from_fmt(fmt!("nvme{}", self.core().instance()))?;
            let dir = root.subdir(&name);
            let mut files = KVec::new();
            for q in self.queues.iter() {
                let file_name = CString::try_from_fmt(fmt!("q{}", q.qid))?;
                let file = KBox::pin_init(
                    dir.read_callback_file(&file_name, q.stats.clone(), &show_stats),
                    GFP_KERNEL,
                )?;
                files.push(file, GFP_KERNEL)?;
                // Without command generations a duplicate is not caught (`nvme_find_rq`): the
                // knob would complete a request twice.
                #[cfg(CONFIG_FAULT_INJECTION_DEBUG_FS)]
                if !self.core().has_quirk(Quirk::SkipCidGen) {
                    let name = CString::try_from_fmt(fmt!("q{}_inject_duplicates", q.qid))?;
                    let knob = KBox::pin_init(
                        dir.write_callback_file(&name, q.stats.clone(), &set_duplicates),
                        GFP_KERNEL,
                    )?;
                    files.push(knob, GFP_KERNEL)?;
                }
            }
            Ok(StatsFiles {
                _files: files,
                _dir: dir,
            })
        })();
        *self.stats.lock() = files.ok();
    }

    /// Follows the end of `nvme_reset_work`: a reset that failed leaves a dead controller
    /// whose I/O fails fast.
    fn give_up(&self, e: Error) {
        let core = self.core();
        dev_warn!(
            core.device(),
            "Disabling device after reset failure: {}\n",
            e.to_errno()
        );
        core.change_state(State::Deleting);
        self.disable(true);
        core.sync_queues();
        core.mark_namespaces_dead();
        core.unquiesce_io();
        core.change_state(State::Dead);
    }

    fn reset(&self, dev: &Device<Bound>) -> Result {
        let core = self.core();
        let was_suspended = core.was_shut_down();
        if core.state() != State::Resetting {
            dev_warn!(
                core.device(),
                "ctrl state {:?} is not RESETTING\n",
                core.state()
            );
            return Err(ENODEV);
        }
        // A live controller is shut down first.
        if core.is_enabled() {
            self.disable(false);
        }
        core.sync_queues();
        {
            let mut st = self.dev.lock();
            self.enable(&mut st)?;
            core.unquiesce_admin();
        }
        if !core.change_state(State::Connecting) {
            dev_warn!(core.device(), "failed to mark controller CONNECTING\n");
            return Err(EBUSY);
        }
        core.init_finish(was_suspended)?;
        self.after_identify();
        self.prepare_shadow(dev);
        self.setup_host_mem(dev)?;
        core.update_attrs();
        self.setup_io_queues(dev)?;
        if self.online() > 1 {
            self.enable_shadow();
            core.unquiesce_io();
            core.wait_freeze();
            if !self.update_nr_queues()? {
                return Err(ENODEV);
            }
            core.unfreeze();
        } else {
            dev_warn!(core.device(), "IO queues lost\n");
            core.mark_namespaces_dead();
            core.unquiesce_io();
            core.remove_namespaces();
            self.remove_io_tag_set();
        }
        if !core.change_state(State::Live) {
            dev_warn!(core.device(), "failed to mark controller live state\n");
            return Err(ENODEV);
        }
        core.start();
        Ok(())
    }

    /// Follows `nvme_should_reset`: a fatal status or a lost NVM subsystem.
    fn should_reset(&self, csts: u32) -> bool {
        let nssro = self.subsystem.load(Relaxed) && csts & csts::NSSRO != 0;
        if matches!(self.core().state(), State::Resetting | State::Connecting) {
            return false;
        }
        csts & csts::CFS != 0 || nssro
    }

    /// Follows `nvme_warn_reset`.
    fn warn_reset(&self, csts: u32) {
        let core = self.core();
        let dev = core.device();
        match self.pci().read_config_word(0x06) {
            Ok(status) => dev_warn!(
                dev,
                "controller is down; will reset: CSTS={:#x}, PCI_STATUS={:#x}\n",
                csts,
                status
            ),
            Err(e) => dev_warn!(
                dev,
                "controller is down; will reset: CSTS={:#x}, PCI_STATUS read failed ({})\n",
                csts,
                e.to_errno()
            ),
        }
        if csts == u32::MAX {
            dev_warn!(
                dev,
                "Does your device have a faulty power saving mode enabled?\n"
            );
            dev_warn!(
                dev,
                "Try \"nvme_core.default_ps_max_latency_us=0 pcie_aspm=off pcie_port_pm=off\" and report a bug\n"
            );
        }
    }

    /// The end of `nvme_timeout` when the controller must go: reset it, or disable it for
    /// good when it is being removed.
    fn timeout_disable(&self) -> bool {
        let core = self.core();
        if !core.change_state(State::Resetting) {
            if core.is_terminal() {
                self.disable(true);
            }
            return false;
        }
        self.disable(false);
        if core.try_sched_reset().is_err() {
            core.unquiesce_io();
        }
        false
    }

    /// The power state to restore on resume. A Get Features the controller refuses does not
    /// fail the system suspend (as in `nvme_suspend`): the state is then unknown, and resume
    /// resets the controller instead of restoring it.
    fn power_state(&self) -> Result<u32> {
        match self.core().get_features(Feature::PowerManagement)? {
            (0, ps) => Ok(ps),
            _ => Ok(u32::MAX),
        }
    }

    fn suspend_to_power_state(&self) -> Result {
        let core = self.core();
        core.start_freeze();
        core.wait_freeze();
        core.sync_queues();
        let result = (|| {
            if core.state() != State::Live {
                return Err(EBUSY);
            }
            // The host memory may not be reachable in a system suspend state; the controller
            // may use it in a non-operational power state.
            {
                let mut hm = self.hmb.lock();
                if hm.enabled {
                    self.set_host_mem(&mut hm, 0)?;
                }
            }
            self.last_power_state.store(self.power_state()?, Relaxed);
            // A saved state keeps the PCI core from changing the device's power on its own.
            self.pci().save_state();
            if core.set_features(Feature::PowerManagement, core.npss().into())? != 0 {
                // The controller refused: forget the saved state and shut it down fully.
                self.pci().discard_saved_state();
                let r = self.disable_prepare_reset(true);
                // A reset on resume will find the right value again.
                core.clear_npss();
                return r;
            }
            Ok(())
        })();
        core.unfreeze();
        result
    }
}

impl TagSetTypes for Controller {
    type Queue = Queue;
    type Iod = Iod;
}

impl Transport for Controller {
    fn core(&self) -> Ctrl {
        self.hw.core
    }

    fn function(&self) -> &Function {
        self.pci()
    }

    /// Follows the first half of `nvme_pci_alloc_dev` and `nvme_dev_map`: the transport's
    /// state, its BAR and DMA pools, and every queue it may use.
    fn new(pdev: &PciDevice<Core<'_>>, core: Ctrl, quirks: Quirks) -> Result<Pin<KBox<Self>>> {
        let pci = Function::new(pdev);
        let dev: &Device<Core<'_>> = pdev.as_ref();
        let regs = Regs::map(pdev)?;
        let pools = Unbindable::new(dev, NodePools::new()?)?;
        let hw = Arc::new(Hw::new(core, pci, regs, pools), GFP_KERNEL)?;
        let io_queues = max_io_queues(
            quirks.has(Quirk::SharedTags),
            params::write_queues(),
            params::poll_queues(),
        );
        // As `pci.c`'s `kzalloc_node`/`kcalloc_node`: on the controller's node.
        let node = Node::from_raw(hw.pci.numa_node());
        let mut queues = KVec::with_capacity(io_queues as usize + 1, GFP_KERNEL)?;
        for qid in 0..=io_queues as u16 {
            queues.push(pin_init_on(Queue::new(qid, hw.clone()), node)?, GFP_KERNEL)?;
        }
        pin_init_on(
            try_pin_init!(Self {
                queues,
                hw,
                dev <- new_mutex!(DevState {
                    depth: 2,
                    stride: 1,
                    online: 0,
                    max_qid: 0,
                    subsystem: false,
                    shadow: None,
                    cmb_size: 0,
                    cmb_use_sqes: false,
                }),
                layout: Layout {
                    vectors: Atomic::new(0),
                    default: Atomic::new(0),
                    read: Atomic::new(0),
                    poll: Atomic::new(0),
                },
                subsystem: Atomic::new(false),
                last_power_state: Atomic::new(u32::MAX),
                stats <- new_mutex!(None),
                making_pools <- new_mutex!(()),
                hmb <- new_mutex!(HostMemory::default()),
            }),
            node,
        )
    }

    /// Follows `nvme_probe` after `nvme_add_ctrl`.
    fn probe(&self, pdev: &PciDevice<Core<'_>>) -> Result {
        let core = self.core();
        let pci = self.pci();
        let bits = if core.has_quirk(Quirk::DmaAddressBits48) {
            48
        } else {
            64
        };
        // Bounce buffers keep the offset within a controller page, which PRPs need.
        pci.dma_setup(bits, PAGE - 1)?;
        let max_sectors =
            (MAX_BYTES >> 9).min((pci.dma_opt_mapping_size() >> 9).min(u32::MAX.into()) as u32);
        core.set_limits(max_sectors, MAX_SEGMENTS, 1);
        dev_info!(core.device(), "pci function {}\n", pci.name());
        let dev: &Device<Core<'_>> = pdev.as_ref();
        let result = self.bring_up(dev);
        if result.is_err() {
            core.change_state(State::Deleting);
            self.disable(true);
            self.remove_admin();
            self.free_memory();
            *self.stats.lock() = None;
        }
        result
    }

    /// Follows `nvme_remove`; nvme-core's part (`nvme_uninit_ctrl`) follows.
    fn remove(&self) {
        let core = self.core();
        core.change_state(State::Deleting);
        if !self.pci().is_present() {
            core.change_state(State::Dead);
            self.disable(true);
        }
        core.flush_reset();
        core.stop();
        // Deleting the disks writes back dirty data, and queues poll meanwhile: CPU hotplug
        // must still end their episodes before a CPU takes their vectors down.
        core.remove_namespaces();
        self.disable(true);
        core.unwatch_cpus();
        self.remove_admin();
        self.free_memory();
        *self.stats.lock() = None;
    }

    /// Follows `nvme_shutdown`: the controller learns of the power-off with I/O drained.
    fn shutdown(&self) {
        let _ = self.disable_prepare_reset(true);
        dev_info!(self.core().device(), "shut down\n");
    }

    fn error_detected(&self, state: ChannelState) -> ErsResult {
        let core = self.core();
        match state {
            ChannelState::Normal => ErsResult::CanRecover,
            ChannelState::Frozen => {
                dev_warn!(
                    core.device(),
                    "frozen state error detected, reset controller\n"
                );
                if !core.change_state(State::Resetting) {
                    self.disable(true);
                    return ErsResult::Disconnect;
                }
                self.disable(false);
                ErsResult::NeedReset
            }
            ChannelState::PermanentFailure => {
                dev_warn!(
                    core.device(),
                    "failure state error detected, request disconnect\n"
                );
                ErsResult::Disconnect
            }
        }
    }

    fn slot_reset(&self) -> ErsResult {
        let core = self.core();
        dev_info!(core.device(), "restart after slot reset\n");
        self.pci().restore_state();
        if core.try_sched_reset().is_err() {
            core.unquiesce_io();
        }
        ErsResult::Recovered
    }

    fn error_resume(&self) {
        self.core().flush_reset();
    }

    /// Follows `nvme_reset_prepare`: the device lock is held, so removal cannot race.
    fn reset_prepare(&self) {
        let _ = self.disable_prepare_reset(false);
        self.core().sync_queues();
    }

    /// Follows `nvme_reset_done`: the function-level reset returns once the reset work it
    /// queued brought the controller back.
    fn reset_done(&self) {
        if self.core().try_sched_reset().is_ok() {
            self.core().flush_reset();
        }
    }

    /// Follows `nvme_suspend`: a low-power state with the queues kept when the platform
    /// keeps the device powered; a full shutdown otherwise.
    fn suspend(&self) -> Result {
        let core = self.core();
        self.last_power_state.store(u32::MAX, Relaxed);
        if !self.pci().keeps_context_in_suspend()
            || core.npss() == 0
            || core.has_quirk(Quirk::SimpleSuspend)
        {
            return self.disable_prepare_reset(true);
        }
        self.suspend_to_power_state()
    }

    fn resume(&self, dev: &Device<Bound>) -> Result {
        let core = self.core();
        let ps = self.last_power_state.load(Relaxed);
        if ps != u32::MAX
            && matches!(core.set_features(Feature::PowerManagement, ps), Ok(0))
            && (core.host_memory_wanted().0 == 0 || matches!(self.setup_host_mem(dev), Ok(0)))
        {
            return Ok(());
        }
        core.try_sched_reset()
    }

    /// Follows `hmb_store`.
    fn set_host_memory(&self, dev: &Device<Bound>, on: bool) -> Result {
        let mut hm = self.hmb.lock();
        if on == hm.enabled {
            return Ok(());
        }
        if on {
            drop(hm);
            self.setup_host_mem(dev)?;
        } else if self.set_host_mem(&mut hm, 0)? == 0 {
            Self::free_host_mem(&mut hm);
        }
        Ok(())
    }

    fn simple_suspend(&self) -> Result {
        self.disable_prepare_reset(true)
    }

    fn simple_resume(&self) -> Result {
        self.core().try_sched_reset()
    }

    fn reg_read32(&self, offset: u32) -> Result<u32> {
        self.hw.regs.read32(offset as usize)
    }

    fn reg_write32(&self, offset: u32, value: u32) -> Result {
        self.hw.regs.write32(offset as usize, value)
    }

    fn reg_read64(&self, offset: u32) -> Result<u64> {
        self.hw.regs.read64(offset as usize)
    }

    fn submit_async_event(&self) {
        self.admin().submit_async_event();
    }

    /// Follows `nvme_pci_subsystem_reset`.
    fn subsystem_reset(&self) -> Result {
        let core = self.core();
        // Held across the state change: removal cannot unmap the BAR meanwhile.
        let _st = self.dev.lock();
        if self.hw.regs.size() == 0 {
            return Err(ENODEV);
        }
        if !core.change_state(State::Resetting) {
            return Err(EBUSY);
        }
        // A failed write means the BAR is going away; the state changes below still leave the
        // controller where `pci.c` leaves it, not stuck resetting.
        let _ = self.hw.regs.write32(regs::NSSR, regs::NSSR_RESET);
        if core.change_state(State::Connecting) && core.change_state(State::Live) {
            // Flushes the write and makes the link error show.
            let _ = self.hw.regs.read32(regs::CSTS);
        }
        Ok(())
    }

    fn virt_boundary(&self, is_admin: bool) -> u64 {
        mapping::virt_boundary(self.core().supports_sgl(), is_admin)
    }

    /// Follows `nvme_reset_work`.
    fn reset_work(&self, dev: &Device<Bound>) {
        if let Err(e) = self.reset(dev) {
            self.give_up(e);
        }
    }

    /// Follows `nvme_init_hctx_common`: the queue's descriptors come from its CPUs' node.
    fn queue(&self, qid: u32, tags: Tags<Iod>, node: Node) -> Option<&Queue> {
        let q = self.queues.get(qid as usize)?;
        let hw = &self.hw;
        {
            // Namespaces are scanned in parallel; a set is made outside the pools' access, which
            // holds an RCU read lock.
            let _making = self.making_pools.lock();
            if hw.pools.with(|sets| sets.on(node.index()).is_none())? {
                let align_512 = hw.core.has_quirk(Quirk::DmaPoolAlign512);
                let pools = Pools::new(&hw.pci, align_512, node).ok()?;
                hw.pools.with(|sets| sets.set(node, pools))?.ok()?;
            }
        }
        q.set_node(node);
        q.set_tags(tags);
        Some(q)
    }

    /// Follows `nvme_pci_map_queues`: interrupt-driven queues (writes, then reads) follow their
    /// vectors' CPUs.
    fn map_queues(&self, maps: &mut QueueMaps<'_>) {
        let vectors = self.layout.vectors.load(Relaxed);
        let mut vector_offset = u32::from(vectors > 1);
        let mut queue_offset = 0;
        for (kind, nr) in [
            (MapKind::Default, self.layout.default.load(Relaxed)),
            (MapKind::Read, self.layout.read.load(Relaxed)),
            (MapKind::Poll, self.layout.poll.load(Relaxed)),
        ] {
            let spread = kind != MapKind::Poll && vector_offset > 0;
            maps.map(kind, nr, queue_offset, spread.then_some(vector_offset));
            queue_offset += nr;
            vector_offset += nr;
        }
    }

    fn cpu_going_down(&self, _cpu: u32) {
        for q in self.queues.iter().skip(1) {
            q.pause_polling();
        }
    }

    fn cpu_down_ended(&self, _cpu: u32) {
        for q in self.queues.iter().skip(1) {
            q.unpause_polling();
        }
    }

    fn abort_done(&self, status: u16) {
        dev_warn!(self.core().device(), "Abort status: {:#x}\n", status);
        self.core().abort_limit_put();
    }

    #[inline(always)]
    fn queue_rq(q: &Queue, rq: Request<Iod>, last: bool) -> Result<(), Rejected> {
        q.queue_rq(rq, last)
    }

    /// Follows `nvme_queue_rqs`: each run of requests for one queue goes in under one lock
    /// and one doorbell write; what cannot go now is handed back for a requeue.
    fn queue_rqs(list: &mut RqList<'_, Self>) {
        let mut submit = LocalRqList::new();
        let mut requeue = LocalRqList::new();
        let mut current: Option<&Queue> = None;
        while let Some((q, mut rq)) = list.pop() {
            if let Some(c) = current.filter(|c| !core::ptr::eq(*c, q)) {
                c.submit_list(&mut submit);
            }
            current = Some(q);
            if q.prep_for_batch(&mut rq) {
                submit.push(rq);
            } else {
                requeue.push(rq);
            }
        }
        if let Some(c) = current {
            c.submit_list(&mut submit);
        }
        while let Some(rq) = requeue.pop() {
            list.push(rq);
        }
    }

    fn commit_rqs(q: &Queue) {
        q.commit();
    }

    fn complete_rq(q: &Queue, rq: Request<Iod>) {
        q.finish(rq);
    }

    /// Follows `nvme_timeout`: look for a lost interrupt first, then abort the command; reset
    /// the controller when an abort did not help, on the admin queue, or when it is failed.
    fn timeout(&self, q: &Queue, rq: InFlight<Iod>) -> bool {
        let core = self.core();
        let dev = core.device();
        let csts = self.hw.regs.read32(regs::CSTS).unwrap_or(u32::MAX);
        // A removed device: shut down now, which unblocks error recovery waiting for it.
        if self.pci().is_disconnected() {
            core.change_state(State::Deleting);
        }
        if core.is_terminal() {
            return self.timeout_disable();
        }
        // Error recovery is resetting the link: a controller reset would make it fail.
        mb(Full);
        if self.pci().is_channel_offline() {
            return true;
        }
        if self.should_reset(csts) {
            self.warn_reset(csts);
            return self.timeout_disable();
        }
        // A missed interrupt?
        if q.is_polled() {
            q.blk_poll(&mut Batch::none());
        } else {
            q.reap_irqs_off();
        }
        let (tag, cid) = (rq.tag(), rq.command_id());
        if !rq.is_in_flight() {
            dev_warn!(
                dev,
                "I/O tag {} ({:04x}) QID {} timeout, completion polled\n",
                tag,
                cid,
                q.qid
            );
            return false;
        }
        // The controller times out while starting: the reset work sees it disabled.
        match core.state() {
            State::Connecting | State::Deleting => {
                core.change_state(State::Deleting);
                dev_warn!(
                    dev,
                    "I/O tag {} ({:04x}) QID {} timeout, disable controller\n",
                    tag,
                    cid,
                    q.qid
                );
                rq.mark_cancelled();
                self.disable(true);
                return false;
            }
            State::Resetting => return true,
            _ => {}
        }
        let opcode = rq.opcode();
        if q.qid == 0 || rq.is_aborted() {
            dev_warn!(
                dev,
                "I/O tag {} ({:04x}) opcode {:#x} QID {} timeout, reset controller\n",
                tag,
                cid,
                opcode,
                q.qid
            );
            rq.mark_cancelled();
            return self.timeout_disable();
        }
        if !core.abort_limit_take() {
            return true;
        }
        rq.mark_aborted();
        dev_warn!(
            dev,
            "I/O tag {} ({:04x}) opcode {:#x} QID {} timeout, aborting req_op:{} size:{}\n",
            tag,
            cid,
            opcode,
            q.qid,
            rq.op_name(),
            rq.bytes()
        );
        if core.submit_abort(&*rq, q.qid).is_err() {
            core.abort_limit_put();
        }
        // The aborted command completes when the Abort does; a second timeout resets.
        true
    }

    fn poll(q: &Queue, batch: &mut Batch<'_>) -> i32 {
        q.blk_poll(batch)
    }

    fn delete_done(&self, qid: u16, failed: bool) {
        match self.queues.get(usize::from(qid)) {
            Some(q) => q.delete_done(failed),
            None => dev_warn!(
                self.core().device(),
                "Delete ended for unknown queue {}\n",
                qid
            ),
        }
    }
}

#[pinned_drop]
impl PinnedDrop for Controller {
    /// nvme-core's last reference went (`nvme_pci_free_ctrl`).
    fn drop(self: Pin<&mut Self>) {
        self.remove_io_tag_set();
    }
}
