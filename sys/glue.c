// SPDX-License-Identifier: GPL-2.0
/*
 * What the Rust side of nvme_adaptive cannot reach by itself: the static inline helpers of
 * nvme-core, blk-mq and the DMA layer, what macros build, and the stock driver's quirks (taken
 * from its pci.c). No driver logic lives here: every decision is made in Rust, which reaches
 * this file only through sys/ffi.rs.
 */

#include <linux/acpi.h>
#include <linux/blk-integrity.h>
#include <linux/blk-mq-dma.h>
#include <linux/blk-mq.h>
#include <linux/completion.h>
#include <linux/dma-mapping.h>
#include <linux/dmi.h>
#include <linux/dmapool.h>
#include <linux/interrupt.h>
#include <linux/memremap.h>
#include <linux/mempool.h>
#include <linux/module.h>
#include <linux/pci.h>
#include <linux/pci-p2pdma.h>

#include "nvme.h"
#include "trace.h"
#include "glue.h"

/*
 * Marks the entries every I/O goes through. Where the Makefile links this file into the Rust
 * code as LLVM bitcode (NVA_GLUE_BITCODE), they are always inlined into their Rust callers, as
 * the kernel marks its Rust helpers for the same linking (rust/helpers/helpers.c): C and Rust
 * functions differ in attributes (-fno-delete-null-pointer-checks, -fno-builtin-wcslen, the
 * spelling of the target features) that keep LLVM from inlining anything else across.
 */
#ifdef NVA_GLUE_BITCODE
#define nva_io_path __always_inline
#else
#define nva_io_path
#endif

/* Rust passes a struct nva_ctrl * to nvme-core's functions as its struct nvme_ctrl *. */
static_assert(offsetof(struct nva_ctrl, ctrl) == 0);
/* Rust's Command and Completion (cmd.rs) are the queue entries, laid out as these. */
static_assert(sizeof(struct nvme_command) == 64);
static_assert(sizeof(struct nvme_completion) == 16);

static struct nva_ctrl *to_nva(struct nvme_ctrl *ctrl)
{
	return container_of(ctrl, struct nva_ctrl, ctrl);
}

static struct nva_iod *iod_of(struct request *rq)
{
	return blk_mq_rq_to_pdu(rq);
}

/* Block statuses, which bindgen cannot give Rust (macros with casts). */
const u8 nva_sts_ioerr = BLK_STS_IOERR;
const u8 nva_sts_resource = BLK_STS_RESOURCE;
const u8 nva_sts_again = BLK_STS_AGAIN;

/* ---------------------------------------------------------------------------------------
 * The controller: allocation, nvme-core calls and fields.
 */
/* A controller not yet known to nvme-core; Rust hands it over (nvme_init_ctrl). */
struct nva_ctrl *nva_ctrl_alloc(struct pci_dev *pdev, work_func_t reset_work)
{
	struct nva_ctrl *c = kzalloc_node(sizeof(*c), GFP_KERNEL, dev_to_node(&pdev->dev));

	if (!c)
		return NULL;
	INIT_WORK(&c->ctrl.reset_work, reset_work);
	c->pdev = pci_dev_get(pdev);
	return c;
}

/* Frees a controller nva_ctrl_init never succeeded on. */
void nva_ctrl_free_unused(struct nva_ctrl *c)
{
	pci_dev_put(c->pdev);
	kfree(c);
}

bool nva_ctrl_sgl_supported(struct nva_ctrl *c)
{
	return nvme_ctrl_sgl_supported(&c->ctrl);
}

bool nva_ctrl_meta_sgl_supported(struct nva_ctrl *c)
{
	return nvme_ctrl_meta_sgl_supported(&c->ctrl);
}

bool nva_ctrl_admin_queue_usable(struct nva_ctrl *c)
{
	return c->ctrl.admin_q && !blk_queue_dying(c->ctrl.admin_q);
}

nva_io_path bool nva_is_aen_cid(u16 qid, u16 cid)
{
	return nvme_is_aen_req(qid, cid);
}

/* ---------------------------------------------------------------------------------------
 * blk-mq.
 */
/* The request behind command identifier @cid, if its generation matches. */
nva_io_path struct request *nva_find_rq(struct blk_mq_tags *tags, u16 cid)
{
	return nvme_find_rq(tags, cid);
}

/*
 * Records a completion on its request. Returns true when nothing more is to be done here (the
 * request completes on another CPU, or fault injection dropped the completion).
 */
nva_io_path bool nva_try_complete_req(struct request *rq, u16 status, u64 result)
{
	union nvme_result res = { .u64 = (__force __le64)result };

	return nvme_try_complete_req(rq, (__force __le16)status, res);
}

/* The transport unmaps a request before adding it to a batch: nothing is left to do here. */
static void nva_batch_unmapped(struct request *rq)
{
}

static void nva_complete_batch(struct io_comp_batch *iob)
{
	nvme_complete_batch(iob, nva_batch_unmapped);
}

/* Adds a completed request to @iob; false when it must be completed on its own. */
nva_io_path bool nva_add_to_batch(struct request *rq, struct io_comp_batch *iob)
{
	return blk_mq_add_to_batch(rq, iob, nvme_req(rq)->status != NVME_SC_SUCCESS,
				   nva_complete_batch);
}

nva_io_path void nva_end_batch(struct io_comp_batch *iob)
{
	if (!rq_list_empty(&iob->req_list))
		iob->complete(iob);
}

/* The tail is read only while the tracepoint is on (the compiler sinks the load into it). */
nva_io_path void nva_trace_sq(struct request *rq, u16 sq_head, const s16 *sq_tail)
{
	trace_nvme_sq(rq, cpu_to_le16(sq_head), (u16)READ_ONCE(*sq_tail));
}

nva_io_path struct request *nva_rq_list_pop(struct rq_list *list)
{
	return rq_list_pop(list);
}

nva_io_path void nva_rq_list_add_tail(struct rq_list *list, struct request *rq)
{
	rq_list_add_tail(list, rq);
}

nva_io_path void nva_rq_list_init(struct rq_list *list)
{
	rq_list_init(list);
}

nva_io_path bool nva_rq_check_ready(struct request *rq)
{
	return nvme_check_ready(nvme_req(rq)->ctrl, rq, true);
}

nva_io_path void nva_rq_start(struct request *rq)
{
	nvme_start_request(rq);
}

u16 nva_rq_cid(struct request *rq)
{
	return nvme_cid(rq);
}

const char *nva_rq_op_name(struct request *rq)
{
	return blk_op_str(req_op(rq));
}

unsigned int nva_rq_payload_bytes(struct request *rq)
{
	return blk_rq_payload_bytes(rq);
}

nva_io_path unsigned short nva_rq_nr_phys_segments(struct request *rq)
{
	return blk_rq_nr_phys_segments(rq);
}

nva_io_path bool nva_rq_has_integrity(struct request *rq)
{
	return blk_integrity_rq(rq);
}

nva_io_path bool nva_rq_gaps_within_page(struct request *rq)
{
	return req_phys_gap_mask(rq) & (NVME_CTRL_PAGE_SIZE - 1);
}

/* ---------------------------------------------------------------------------------------
 * DMA mapping of request data and metadata, with the block layer's iterators.
 */
/*
 * Maps the first (only) data segment into @addr and @len, unless it lies in p2p memory or its
 * offset in its controller page plus its length exceeds @max_end: then BLK_STS_AGAIN, the DMA
 * iterator must map it. One call for looking and mapping: this runs for most I/Os.
 */
nva_io_path blk_status_t nva_map_first_bvec(struct request *rq, struct device *dev, u32 max_end,
					    u64 *addr, u32 *len)
{
	struct bio_vec bv;
	dma_addr_t dma;

	/* A request without data has nothing to map (and no bio to look at). */
	if (unlikely(!rq->bio))
		return BLK_STS_IOERR;
	bv = req_bvec(rq);
	if ((u64)(bv.bv_offset & (NVME_CTRL_PAGE_SIZE - 1)) + bv.bv_len > max_end ||
	    is_pci_p2pdma_page(bv.bv_page))
		return BLK_STS_AGAIN;
	dma = dma_map_bvec(dev, &bv, rq_dma_dir(rq), 0);
	if (dma_mapping_error(dev, dma))
		return BLK_STS_RESOURCE;
	*addr = dma;
	*len = bv.bv_len;
	return BLK_STS_OK;
}

nva_io_path void nva_unmap_page(struct request *rq, struct device *dev, u64 addr, u32 len)
{
	dma_unmap_page(dev, addr, len, rq_dma_dir(rq));
}

bool nva_blk_rq_dma_map_coalesce(struct dma_iova_state *state)
{
	return blk_rq_dma_map_coalesce(state);
}

/* Whether every segment mapped by the iterator must be unmapped one by one. */
bool nva_dma_need_unmap_each(struct request *rq, struct device *dev, u8 p2p)
{
	return !dma_use_iova(&iod_of(rq)->dma_state) && dma_need_unmap(dev) &&
	       p2p != PCI_P2PDMA_MAP_BUS_ADDR;
}

bool nva_blk_rq_dma_unmap(struct request *rq, struct device *dev, struct dma_iova_state *state,
			  size_t len, u8 p2p)
{
	return blk_rq_dma_unmap(rq, dev, state, len, p2p);
}

void nva_dma_unmap_phys(struct request *rq, struct device *dev, u64 addr, u32 len, u8 p2p)
{
	dma_unmap_phys(dev, addr, len, rq_dma_dir(rq),
		       p2p == PCI_P2PDMA_MAP_THRU_HOST_BRIDGE ? DMA_ATTR_MMIO : 0);
}

/*
 * The metadata of a request with one integrity segment: its length and whether it is p2p.
 * Without integrity data, reported as p2p: the iterator then takes over and fails it.
 */
void nva_rq_integrity_bvec(struct request *rq, u32 *len, bool *p2p)
{
	struct bio_vec bv;

	if (unlikely(!blk_integrity_rq(rq))) {
		*len = 0;
		*p2p = true;
		return;
	}
	bv = rq_integrity_vec(rq);
	*len = bv.bv_len;
	*p2p = is_pci_p2pdma_page(bv.bv_page);
}

bool nva_map_integrity_bvec(struct request *rq, struct device *dev, u64 *addr)
{
	struct bio_vec bv;
	dma_addr_t dma;

	if (unlikely(!blk_integrity_rq(rq)))
		return false;
	bv = rq_integrity_vec(rq);
	dma = dma_map_bvec(dev, &bv, rq_dma_dir(rq), 0);
	if (dma_mapping_error(dev, dma))
		return false;
	*addr = dma;
	return true;
}

/* Pools of arrays of saved DMA ranges, for unmapping PRP data segment by segment. */
mempool_t *nva_vec_pool_create(size_t size, int node)
{
	return mempool_create_node(1, mempool_kmalloc, mempool_kfree, (void *)size,
				   GFP_KERNEL, node);
}

void *nva_vec_pool_alloc(mempool_t *pool)
{
	return mempool_alloc(pool, GFP_ATOMIC);
}

/* ---------------------------------------------------------------------------------------
 * PCI and interrupts.
 */
bool nva_pci_is_enabled(struct pci_dev *pdev)
{
	return pci_is_enabled(pdev);
}

bool nva_pci_channel_offline(struct pci_dev *pdev)
{
	return pci_channel_offline(pdev);
}

bool nva_pci_disconnected(struct pci_dev *pdev)
{
	return pci_dev_is_disconnected(pdev);
}

const char *nva_pci_name(struct pci_dev *pdev)
{
	return pci_name(pdev);
}

int nva_pci_numa_node(struct pci_dev *pdev)
{
	return dev_to_node(&pdev->dev);
}

unsigned int nva_nr_node_ids(void)
{
	return nr_node_ids;
}

/* Whether a system suspend keeps the device powered, with its link in a low-power state. */
bool nva_pci_keeps_context_in_suspend(struct pci_dev *pdev)
{
	return pci_suspend_retains_context(pdev) && pcie_aspm_enabled(pdev);
}

/* BAR @bar's bus address; 0 for a BAR number beyond the standard six. */
u64 nva_pci_bar_bus_address(struct pci_dev *pdev, unsigned int bar)
{
	return bar < PCI_STD_NUM_BARS ? pci_bus_address(pdev, bar) : 0;
}

unsigned long nva_memremap_compat_align(void)
{
	return memremap_compat_align();
}

/*
 * Peer-to-peer memory in the controller's BARs. Without CONFIG_PCI_P2PDMA the header's stubs
 * fail: no resource is added, and no memory is handed out.
 */
int nva_p2pdma_add_resource(struct pci_dev *pdev, unsigned int bar, u64 size, u64 offset)
{
	if (bar >= PCI_STD_NUM_BARS)
		return -EINVAL;
	return pci_p2pdma_add_resource(pdev, bar, size, offset);
}

void nva_p2pmem_publish(struct pci_dev *pdev, bool publish)
{
	pci_p2pmem_publish(pdev, publish);
}

/* @size bytes of the function's peer-to-peer memory, and their bus address in @bus. */
void *nva_p2pmem_alloc(struct pci_dev *pdev, size_t size, u64 *bus)
{
	void *p = pci_alloc_p2pmem(pdev, size);

	*bus = p ? pci_p2pmem_virt_to_bus(pdev, p) : 0;
	return p;
}

void nva_p2pmem_free(struct pci_dev *pdev, void *p, size_t size)
{
	pci_free_p2pmem(pdev, p, size);
}

/* The largest block the page allocator hands out. */
u64 nva_max_block_size(void)
{
	return PAGE_SIZE * MAX_ORDER_NR_PAGES;
}

int nva_dma_setup(struct pci_dev *pdev, unsigned int mask_bits, unsigned int min_align_mask)
{
	int ret = dma_set_mask_and_coherent(&pdev->dev, DMA_BIT_MASK(mask_bits));

	if (ret)
		return ret;
	dma_set_min_align_mask(&pdev->dev, min_align_mask);
	dma_set_max_seg_size(&pdev->dev, 0xffffffff);
	return 0;
}

void nva_reinit_completion(struct completion *x)
{
	reinit_completion(x);
}

/* ---------------------------------------------------------------------------------------
 * What Rust's nvme_ctrl_ops (sys/entry.rs) take from C: two entries that read nvme-core's
 * subsystem or wrap an inline.
 */
void nva_print_device_info(struct nvme_ctrl *ctrl)
{
	struct pci_dev *pdev = to_nva(ctrl)->pdev;
	struct nvme_subsystem *subsys = ctrl->subsys;

	dev_err(ctrl->device, "VID:DID %04x:%04x model:%.*s firmware:%.*s\n",
		pdev->vendor, pdev->device,
		nvme_strlen(subsys->model, sizeof(subsys->model)), subsys->model,
		nvme_strlen(subsys->firmware_rev, sizeof(subsys->firmware_rev)),
		subsys->firmware_rev);
}

bool nva_supports_pci_p2pdma(struct nvme_ctrl *ctrl)
{
	return dma_pci_p2pdma_supported(&to_nva(ctrl)->pdev->dev);
}

/*
 * The stock driver's table (quirks per device, then every NVMe controller by class), taken from
 * the pci.c of the kernel being built against (see the Makefile), for the quirks only: the
 * driver has no ID table, so it never binds a controller by itself, only one whose
 * driver_override names it (tools/nvme-bind).
 */
static const struct pci_device_id nva_quirk_table[] = {
#include "nvme_pci_ids.h"
};

/* Its quirks= and noacpi parameters and DMI quirks, from the same pci.c. */
#include "nvme_pci_quirks.h"

/* The stock driver's quirks for @pdev, as nvme_pci_alloc_dev computes them. */
unsigned long nva_pci_quirks(struct pci_dev *pdev)
{
	const struct pci_device_id *id = pci_match_id(nva_quirk_table, pdev);
	unsigned long quirks = id ? id->driver_data : 0;
	struct quirk_entry *qentry;

	quirks |= check_vendor_combination_bug(pdev);
	if (!noacpi && !(quirks & NVME_QUIRK_FORCE_NO_SIMPLE_SUSPEND) &&
	    acpi_storage_d3(&pdev->dev)) {
		dev_info(&pdev->dev, "platform quirk: setting simple suspend\n");
		quirks |= NVME_QUIRK_SIMPLE_SUSPEND;
	}
	qentry = detect_dynamic_quirks(pdev);
	if (qentry) {
		quirks |= qentry->enabled_quirks;
		quirks &= ~qentry->disabled_quirks;
	}
	return quirks;
}

/* Frees what the quirks= parameter allocated (pci.c's nvme_exit). */
void nva_pci_quirks_exit(void)
{
	kfree(nvme_pci_quirk_list);
}
