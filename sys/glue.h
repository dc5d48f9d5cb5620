/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The functions, constants and types glue.c offers the Rust side: bindgen generates their Rust
 * declarations from this header (Makefile, sys/ffi.rs). See glue.c for what each does.
 */
#ifndef NVA_GLUE_H
#define NVA_GLUE_H

#include <linux/blk-integrity.h>
#include <linux/blk-mq-dma.h>
#include <linux/blk-mq.h>
#include <linux/completion.h>
#include <linux/dmapool.h>
#include <linux/mempool.h>
#include <linux/pci.h>

#include "nvme.h"

/*
 * A controller: nvme-core's part, the two tag sets nvme-core points at, and the Rust side, which
 * reads and sets nvme-core's fields itself (bindgen gives it struct nvme_ctrl).
 */
struct nva_ctrl {
	struct nvme_ctrl ctrl;
	struct blk_mq_tag_set tagset;
	struct blk_mq_tag_set admin_tagset;
	struct pci_dev *pdev;
	/* The Rust controller, from probe until free_ctrl. */
	void *transport;
	/* The operations Rust built for its transport (sys/nvme.rs, Operations). */
	const void *ops;
	/* Instances of the CPU hotplug states, while @cpu_watch says so (sys/nvme.rs). */
	struct hlist_node cpu_down_node;
	struct hlist_node cpu_dead_node;
	int cpu_watch;
	/* Queues holding tags of the admin and of the I/O tag set (sys/blk.rs, Tags), and those
	 * of them that may find requests by them, with a flag while the tag set is cancelled. */
	int tags_held[2];
	int tags_open[2];
	/* The CMBLOC and CMBSZ the transport read, for sysfs (0: the controller has no CMB). */
	u32 cmbloc;
	u32 cmbsz;
	/* The controller uses its host memory buffer (sysfs "hmb"). */
	bool hmb;
};

/*
 * Per-request data. nvme-core's part comes first (nvme_req() is the PDU itself), then the
 * command it builds and the DMA mapping state of the block layer's iterators, then the Rust
 * part, whose size Rust gives when the tag set is allocated.
 */
struct nva_iod {
	struct nvme_request req;
	struct nvme_command cmd;
	struct dma_iova_state dma_state;
	struct dma_iova_state meta_dma_state;
	struct blk_dma_iter iter;
	/* An Abort was sent for the command: its next timeout resets the controller. */
	bool aborted;
	/* The command was handed to the device since the request started (sys/blk.rs). */
	int on_device;
	u64 rust[];
};

extern const u8 nva_sts_ioerr;
extern const u8 nva_sts_resource;
extern const u8 nva_sts_again;

struct nva_ctrl *nva_ctrl_alloc(struct pci_dev *pdev, work_func_t reset_work);
void nva_ctrl_free_unused(struct nva_ctrl *c);
bool nva_ctrl_sgl_supported(struct nva_ctrl *c);
bool nva_ctrl_meta_sgl_supported(struct nva_ctrl *c);
bool nva_ctrl_admin_queue_usable(struct nva_ctrl *c);
bool nva_is_aen_cid(u16 qid, u16 cid);
struct request *nva_find_rq(struct blk_mq_tags *tags, u16 cid);
bool nva_try_complete_req(struct request *rq, u16 status, u64 result);
bool nva_add_to_batch(struct request *rq, struct io_comp_batch *iob);
void nva_end_batch(struct io_comp_batch *iob);
void nva_trace_sq(struct request *rq, u16 sq_head, const s16 *sq_tail);
struct request *nva_rq_list_pop(struct rq_list *list);
void nva_rq_list_add_tail(struct rq_list *list, struct request *rq);
void nva_rq_list_init(struct rq_list *list);
bool nva_rq_check_ready(struct request *rq);
void nva_rq_start(struct request *rq);
u16 nva_rq_cid(struct request *rq);
const char *nva_rq_op_name(struct request *rq);
unsigned int nva_rq_payload_bytes(struct request *rq);
unsigned short nva_rq_nr_phys_segments(struct request *rq);
bool nva_rq_has_integrity(struct request *rq);
bool nva_rq_gaps_within_page(struct request *rq);
blk_status_t nva_map_first_bvec(struct request *rq, struct device *dev, u32 max_end,
				u64 *addr, u32 *len);
void nva_unmap_page(struct request *rq, struct device *dev, u64 addr, u32 len);
bool nva_blk_rq_dma_map_coalesce(struct dma_iova_state *state);
bool nva_dma_need_unmap_each(struct request *rq, struct device *dev, u8 p2p);
bool nva_blk_rq_dma_unmap(struct request *rq, struct device *dev, struct dma_iova_state *state,
			  size_t len, u8 p2p);
void nva_dma_unmap_phys(struct request *rq, struct device *dev, u64 addr, u32 len, u8 p2p);
void nva_rq_integrity_bvec(struct request *rq, u32 *len, bool *p2p);
bool nva_map_integrity_bvec(struct request *rq, struct device *dev, u64 *addr);
mempool_t *nva_vec_pool_create(size_t size, int node);
void *nva_vec_pool_alloc(mempool_t *pool);
bool nva_pci_is_enabled(struct pci_dev *pdev);
bool nva_pci_channel_offline(struct pci_dev *pdev);
bool nva_pci_disconnected(struct pci_dev *pdev);
const char *nva_pci_name(struct pci_dev *pdev);
int nva_pci_numa_node(struct pci_dev *pdev);
unsigned int nva_nr_node_ids(void);
bool nva_pci_keeps_context_in_suspend(struct pci_dev *pdev);
u64 nva_pci_bar_bus_address(struct pci_dev *pdev, unsigned int bar);
unsigned long nva_memremap_compat_align(void);
int nva_p2pdma_add_resource(struct pci_dev *pdev, unsigned int bar, u64 size, u64 offset);
void nva_p2pmem_publish(struct pci_dev *pdev, bool publish);
void *nva_p2pmem_alloc(struct pci_dev *pdev, size_t size, u64 *bus);
void nva_p2pmem_free(struct pci_dev *pdev, void *p, size_t size);
u64 nva_max_block_size(void);
int nva_dma_setup(struct pci_dev *pdev, unsigned int mask_bits, unsigned int min_align_mask);
void nva_reinit_completion(struct completion *x);
void nva_print_device_info(struct nvme_ctrl *ctrl);
bool nva_supports_pci_p2pdma(struct nvme_ctrl *ctrl);
unsigned long nva_pci_quirks(struct pci_dev *pdev);
void nva_pci_quirks_exit(void);

#endif /* NVA_GLUE_H */
