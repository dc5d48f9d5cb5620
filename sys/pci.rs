// SPDX-License-Identifier: GPL-2.0

//! The PCI function of a controller: enabling it, its BAR, interrupt vectors, error recovery
//! states, and DMA setup.
//!
//! The kernel crate ties these to the probe and unbind callbacks; an NVMe transport also
//! disables and re-enables the function from reset work and error recovery, so [`Function`]
//! wraps the C calls for any context the driver is bound in.
//!
//! C headers: [`include/linux/pci.h`](srctree/include/linux/pci.h) and
//! [`include/linux/dma-mapping.h`](srctree/include/linux/dma-mapping.h)

use core::mem::ManuallyDrop;

use kernel::{
    bindings,
    device::{
        Bound,
        Core,
        Device, //
    },
    devres::DevresLt,
    error::to_result,
    io::{
        Io,
        IoBackend,
        IoBase,
        IoCapable,
        Mmio,
        MmioBackend,
        MmioRaw, //
    },
    pci::{
        Bar,
        Device as PciDevice, //
    },
    prelude::*,
    ptr::KnownSize,
    str::CStr,
    sync::{
        aref::ARef,
        atomic::{
            Acquire,
            Atomic,
            Relaxed,
            Release, //
        },
        Arc, //
    },
    types::CovariantForLt,
    warn_on, //
};

use super::ffi;

/// PCI error recovery: what happened to the link (`pci_channel_state_t`).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum ChannelState {
    Normal,
    Frozen,
    PermanentFailure,
}

impl ChannelState {
    pub(super) fn from_raw(raw: u32) -> Self {
        match raw {
            bindings::pci_channel_io_normal => Self::Normal,
            bindings::pci_channel_io_frozen => Self::Frozen,
            _ => Self::PermanentFailure,
        }
    }
}

/// PCI error recovery: what the driver asks for (`pci_ers_result_t`).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum ErsResult {
    CanRecover,
    NeedReset,
    Disconnect,
    Recovered,
}

impl ErsResult {
    pub(super) fn to_raw(self) -> u32 {
        match self {
            Self::CanRecover => bindings::pci_ers_result_PCI_ERS_RESULT_CAN_RECOVER,
            Self::NeedReset => bindings::pci_ers_result_PCI_ERS_RESULT_NEED_RESET,
            Self::Disconnect => bindings::pci_ers_result_PCI_ERS_RESULT_DISCONNECT,
            Self::Recovered => bindings::pci_ers_result_PCI_ERS_RESULT_RECOVERED,
        }
    }
}

/// The controller's PCI function, usable while the driver is bound to it.
#[derive(Clone)]
pub(crate) struct Function(ARef<PciDevice>);

macro_rules! pci_calls {
    ($($(#[$m:meta])* $name:ident -> $ty:ty = $call:expr;)*) => {
        $(
            $(#[$m])*
            pub(crate) fn $name(&self) -> $ty {
                let pdev = self.raw();
                // SAFETY: `pdev` is a live PCI device (the reference is counted); these calls
                // are allowed in any sleeping context while a driver is bound.
                unsafe { $call(pdev) }
            }
        )*
    };
}

impl Function {
    pub(crate) fn new(pdev: &PciDevice<Core<'_>>) -> Self {
        let pdev: &PciDevice = pdev;
        Self(pdev.into())
    }

    /// The function as a device the driver is bound to, for allocations that need one.
    ///
    /// # Safety
    ///
    /// The driver is bound to the function, and stays bound for the returned lifetime.
    pub(super) unsafe fn as_bound(&self) -> &Device<Bound> {
        let dev: &Device = self.0.as_ref();
        // SAFETY: The caller's promise.
        unsafe { dev.as_bound() }
    }

    pub(super) fn raw(&self) -> *mut bindings::pci_dev {
        core::ptr::from_ref(&*self.0)
            .cast::<bindings::pci_dev>()
            .cast_mut()
    }

    /// The generic device's address, taken without the kernel crate's `AsRef` (two calls it
    /// does not inline), since every mapping and unmapping of a request asks for it.
    #[inline]
    pub(super) fn dma_dev(&self) -> *mut bindings::device {
        // SAFETY: `raw()` points to a live PCI device (the reference is counted); only the
        // address of the device embedded in it is taken.
        unsafe { core::ptr::addr_of_mut!((*self.raw()).dev) }
    }

    pub(crate) fn vendor_id(&self) -> u16 {
        self.0.vendor_id().as_raw()
    }

    pub(crate) fn device_id(&self) -> u16 {
        self.0.device_id()
    }

    pub(crate) fn enable_mem(&self) -> Result {
        // SAFETY: `pdev` is live; enabling is refcounted by the PCI core.
        to_result(unsafe { bindings::pci_enable_device_mem(self.raw()) })
    }

    pci_calls! {
        set_master -> () = bindings::pci_set_master;
        /// Disables the function (memory decoding and bus mastering off).
        disable -> () = bindings::pci_disable_device;
        is_enabled -> bool = ffi::nva_pci_is_enabled;
        /// Whether the device still answers on the bus.
        is_present -> bool = bindings::pci_device_is_present;
        /// PCI error recovery is in progress on the link.
        is_channel_offline -> bool = ffi::nva_pci_channel_offline;
        is_disconnected -> bool = ffi::nva_pci_disconnected;
        save_state -> () = |p| { bindings::pci_save_state(p); };
        restore_state -> () = bindings::pci_restore_state;
        numa_node -> i32 = ffi::nva_pci_numa_node;
        /// Whether a system suspend leaves the device powered with its link in a low-power state.
        keeps_context_in_suspend -> bool = ffi::nva_pci_keeps_context_in_suspend;
        /// Frees the interrupt vectors (every interrupt on them must be freed first).
        free_irq_vectors -> () = bindings::pci_free_irq_vectors;
        /// Forgets the saved config space, so that the PCI core controls the device's power.
        discard_saved_state -> () = |p| { bindings::pci_load_saved_state(p, core::ptr::null_mut()); };
    }

    /// No PCI error recovery is in progress or has failed (`pci_channel_io_normal`).
    pub(crate) fn is_error_state_normal(&self) -> bool {
        // SAFETY: `pdev` is live; the PCI core changes the state atomically (xchg, cmpxchg)
        // and readers read it once.
        let state = unsafe { core::ptr::addr_of!((*self.raw()).error_state).read_volatile() };
        state == bindings::pci_channel_io_normal
    }

    pub(crate) fn msix_enabled(&self) -> bool {
        // SAFETY: `pdev` is live; the PCI core changes the bit while enabling or disabling
        // vectors, which the driver itself does.
        unsafe { (*self.raw()).msix_enabled() != 0 }
    }

    /// The largest mapping that stays efficient (an IOMMU's cached range, or unlimited).
    pub(crate) fn dma_opt_mapping_size(&self) -> u64 {
        // SAFETY: `pdev` is live.
        unsafe { bindings::dma_opt_mapping_size(self.dma_dev()) as u64 }
    }

    /// The PCI address, as `dddd:bb:dd.f`.
    pub(crate) fn name(&self) -> &CStr {
        // SAFETY: `pdev` is live; its name lives as long as the device.
        unsafe { CStr::from_char_ptr(ffi::nva_pci_name(self.raw())) }
    }

    /// Resets the function with a Function Level Reset.
    pub(crate) fn reset_flr(&self) -> Result {
        // SAFETY: `pdev` is live; the caller holds the device in a state it may reset.
        to_result(unsafe { bindings::pcie_reset_flr(self.raw(), false) })
    }

    pub(crate) fn read_config_word(&self, offset: u16) -> Result<u16> {
        let mut v = 0;
        // SAFETY: `pdev` is live and `v` valid for writes.
        let ret = unsafe { bindings::pci_read_config_word(self.raw(), offset.into(), &mut v) };
        if ret != 0 {
            return Err(EIO);
        }
        Ok(v)
    }

    /// Sets the DMA mask (`bits` wide), keeps bounce buffers aligned like the data within
    /// `min_align_mask`, and allows segments of any size.
    pub(crate) fn dma_setup(&self, bits: u32, min_align_mask: u32) -> Result {
        // SAFETY: `pdev` is live and being probed.
        to_result(unsafe { ffi::nva_dma_setup(self.raw(), bits, min_align_mask) })
    }

    /// BAR `bar`'s CPU address (0 for a BAR number beyond the six standard ones).
    pub(crate) fn bar_start(&self, bar: u32) -> u64 {
        if bar >= bindings::PCI_STD_NUM_BARS {
            return 0;
        }
        // SAFETY: `pdev` is live and `bar` one of its standard BARs.
        unsafe { bindings::pci_resource_start(self.raw(), bar as c_int) }
    }

    /// BAR `bar`'s size (0 for a BAR number beyond the six standard ones).
    pub(crate) fn bar_len(&self, bar: u32) -> u64 {
        if bar >= bindings::PCI_STD_NUM_BARS {
            return 0;
        }
        // SAFETY: `pdev` is live and `bar` one of its standard BARs.
        unsafe { bindings::pci_resource_len(self.raw(), bar as c_int) }
    }

    /// BAR `bar`'s address on the bus (0 for a BAR number beyond the six standard ones).
    pub(crate) fn bar_bus_address(&self, bar: u32) -> u64 {
        // SAFETY: `pdev` is live; glue.c checks `bar`.
        unsafe { ffi::nva_pci_bar_bus_address(self.raw(), bar) }
    }

    /// The boundary an IOMMU merges DMA segments at (0: none merges them).
    pub(crate) fn dma_merge_boundary(&self) -> u64 {
        // SAFETY: `pdev` is live.
        unsafe { bindings::dma_get_merge_boundary(self.dma_dev()) as u64 }
    }

    /// Registers `size` bytes at `offset` in BAR `bar` as peer-to-peer memory, until the driver
    /// unbinds (`pci_p2pdma_add_resource`); `EOPNOTSUPP` without `CONFIG_PCI_P2PDMA`.
    pub(crate) fn add_p2p_memory(&self, bar: u32, size: u64, offset: u64) -> Result {
        // SAFETY: `pdev` is live and the driver bound (the resource is device-managed); glue.c
        // checks `bar`, the PCI core `size` and `offset` against the BAR.
        to_result(unsafe { ffi::nva_p2pdma_add_resource(self.raw(), bar, size, offset) })
    }

    /// Offers the function's peer-to-peer memory to other drivers (`pci_p2pmem_publish`).
    pub(crate) fn publish_p2p_memory(&self, publish: bool) {
        // SAFETY: `pdev` is live; without registered memory the call does nothing.
        unsafe { ffi::nva_p2pmem_publish(self.raw(), publish) }
    }

    /// Allocates between 1 and `max` interrupt vectors (MSI-X, else MSI if `msi_ok`, else
    /// INTx), without affinity.
    pub(crate) fn alloc_irq_vectors(&self, max: u32, msi_ok: bool) -> Result<u32> {
        self.alloc_vectors(max, false, msi_ok, 0).map(|(n, _)| n)
    }

    /// The same for the I/O queues: vectors after the first get managed affinity over the CPUs,
    /// in one set, or with `write_queues` in two (`nvme_calc_irq_sets`): that many for writes
    /// and the rest for reads, at least one each. Returns the vectors and the read set's size
    /// (0: one set).
    pub(crate) fn alloc_queue_vectors(
        &self,
        max: u32,
        msi_ok: bool,
        write_queues: u32,
    ) -> Result<(u32, u32)> {
        self.alloc_vectors(max, true, msi_ok, write_queues)
    }

    /// With `spread`, the vectors after the first get managed affinity, in the sets of
    /// [`split_irq_sets`] for `write_queues`; the read set's size comes back with the count.
    fn alloc_vectors(
        &self,
        max: u32,
        spread: bool,
        msi_ok: bool,
        write_queues: u32,
    ) -> Result<(u32, u32)> {
        let mut flags = bindings::PCI_IRQ_ALL_TYPES;
        if !msi_ok {
            flags &= !bindings::PCI_IRQ_MSI;
        }
        if !spread {
            // SAFETY: `pdev` is live and has no vectors allocated (the caller frees them
            // first).
            let n = unsafe { bindings::pci_alloc_irq_vectors(self.raw(), 1, max, flags) };
            to_result(n.min(0))?;
            return Ok((n as u32, 0));
        }
        let mut sets = IrqSets {
            write_queues,
            read_queues: 0,
        };
        let mut affinity = bindings::irq_affinity {
            pre_vectors: 1,
            calc_sets: Some(calc_irq_sets),
            priv_: core::ptr::from_mut(&mut sets).cast(),
            ..Default::default()
        };
        flags |= bindings::PCI_IRQ_AFFINITY;
        // SAFETY: As above; `affinity` and the `IrqSets` it points to outlive the call, which
        // runs `calc_irq_sets` on them.
        let n = unsafe {
            bindings::pci_alloc_irq_vectors_affinity(self.raw(), 1, max, flags, &mut affinity)
        };
        to_result(n.min(0))?;
        Ok((n as u32, sets.read_queues))
    }

    /// The Linux interrupt number of vector `index`.
    pub(crate) fn irq_vector(&self, index: u32) -> Result<u32> {
        // SAFETY: `pdev` is live; the PCI core checks `index` against the allocated vectors.
        let irq = unsafe { bindings::pci_irq_vector(self.raw(), index) };
        to_result(irq.min(0))?;
        Ok(irq as u32)
    }
}

/// The controller's registers (BAR0), revoked when the driver unbinds.
pub(crate) struct Regs {
    mapping: DevresLt<CovariantForLt!(Mapping<'_>)>,
}

/// BAR0's mapping as devres keeps it, with the count of doorbells mapped from it.
struct Mapping<'a> {
    /// Unmapped when devres drops the mapping with no doorbell held, kept (leaked) otherwise.
    bar: ManuallyDrop<Bar<'a>>,
    holds: Arc<Atomic<usize>>,
}

impl Drop for Mapping<'_> {
    fn drop(&mut self) {
        // Devres revokes the mapping before dropping it, after a grace period: every doorbell
        // mapped inside its guard is counted by now.
        if warn_on!(self.holds.load(Acquire) != 0) {
            // A queue kept a doorbell past the unbind: leaving the BAR mapped (and the region
            // requested) keeps its writes harmless.
            pr_err!("a doorbell is held past unbind, BAR0 stays mapped\n");
            return;
        }
        // SAFETY: `bar` is dropped here only, and `self` is not used after.
        unsafe { ManuallyDrop::drop(&mut self.bar) };
    }
}

impl Regs {
    /// Maps BAR0 whole (registers, doorbells, MSI-X table).
    pub(crate) fn map(pdev: &PciDevice<Core<'_>>) -> Result<Self> {
        let bar: Bar<'_> = pdev.iomap_region(0, c"nvme")?;
        let mapping = Mapping {
            bar: ManuallyDrop::new(bar),
            holds: Arc::new(Atomic::new(0), GFP_KERNEL)?,
        };
        // SAFETY: `mapping` holds what `Bar::into_devres` hands devres (a reference to the
        // bound device and the mapping, valid for the device's whole bound scope) and a count.
        let mapping = unsafe { DevresLt::new(pdev.as_ref(), mapping) }?;
        Ok(Self { mapping })
    }

    pub(crate) fn read32(&self, offset: usize) -> Result<u32> {
        let mapping = self.mapping.try_access().ok_or(ENODEV)?;
        (&*mapping.bar).try_read32(offset)
    }

    pub(crate) fn write32(&self, offset: usize, value: u32) -> Result {
        let mapping = self.mapping.try_access().ok_or(ENODEV)?;
        (&*mapping.bar).try_write32(value, offset)
    }

    /// The doorbell register at `offset`, written without asking whether the BAR is still
    /// mapped: while a [`MappedDoorbell`] is held, it is.
    pub(crate) fn map_doorbell(&self, offset: usize) -> Result<MappedDoorbell> {
        let mapping = self.mapping.try_access().ok_or(ENODEV)?;
        let region = MmioBackend::as_ptr((&*mapping.bar).as_view());
        if offset % 4 != 0 || offset >= KnownSize::size(region) {
            return Err(EINVAL);
        }
        // Counted while the guard keeps devres from dropping the mapping.
        mapping.holds.fetch_add(1, Relaxed);
        Ok(MappedDoorbell {
            register: MmioRaw::new(region.cast::<u8>().addr() + offset),
            holds: mapping.holds.clone(),
        })
    }

    /// A 64-bit register, read low half first (as `lo_hi_readq`).
    pub(crate) fn read64(&self, offset: usize) -> Result<u64> {
        let mapping = self.mapping.try_access().ok_or(ENODEV)?;
        let bar = &*mapping.bar;
        let lo = bar.try_read32(offset)?;
        let hi = bar.try_read32(offset + 4)?;
        Ok(u64::from(hi) << 32 | u64::from(lo))
    }

    /// A 64-bit register, written low half first (as `lo_hi_writeq`).
    pub(crate) fn write64(&self, offset: usize, value: u64) -> Result {
        let mapping = self.mapping.try_access().ok_or(ENODEV)?;
        let bar = &*mapping.bar;
        bar.try_write32(value as u32, offset)?;
        bar.try_write32((value >> 32) as u32, offset + 4)
    }

    /// A 64-bit register, written high half first (as `hi_lo_writeq`): for registers that
    /// take effect when their low half is written.
    pub(crate) fn write64_hi_lo(&self, offset: usize, value: u64) -> Result {
        let mapping = self.mapping.try_access().ok_or(ENODEV)?;
        let bar = &*mapping.bar;
        bar.try_write32((value >> 32) as u32, offset + 4)?;
        bar.try_write32(value as u32, offset)
    }

    /// The mapped size; 0 once revoked.
    pub(crate) fn size(&self) -> usize {
        self.mapping
            .try_access()
            .map_or(0, |mapping| (&*mapping.bar).size())
    }
}

/// A doorbell register of BAR0, kept mapped while held: the write of every submission and
/// completion, with nothing to check. Queues drop theirs when they free their rings, before
/// the driver unbinds.
pub(crate) struct MappedDoorbell {
    /// A 32-bit aligned register inside the mapping.
    register: MmioRaw<u32>,
    holds: Arc<Atomic<usize>>,
}

impl MappedDoorbell {
    #[inline(always)]
    pub(crate) fn write(&self, value: u32) {
        // SAFETY: `register` is a 32-bit register inside BAR0's mapping, aligned
        // (`Regs::map_doorbell` checked the offset against the BAR's size and for alignment, and
        // the base is aligned, `Region`'s invariant), and the mapping outlives `self`: devres
        // unmaps it only when no doorbell is held, and leaves it mapped otherwise (`Mapping`'s
        // drop).
        let register = unsafe { Mmio::from_raw(self.register) };
        MmioBackend::io_write(register, value);
    }
}

impl Drop for MappedDoorbell {
    fn drop(&mut self) {
        // Release: the doorbell's writes come before the count that lets the BAR be unmapped.
        self.holds.fetch_sub(1, Release);
    }
}

/// What [`calc_irq_sets`] works from (`irq_affinity.priv`): the write queues asked for, and
/// the read set's size it chose last.
struct IrqSets {
    write_queues: u32,
    read_queues: u32,
}

/// pci.c's `nvme_calc_irq_sets`: how `nrirqs` vectors after the admin queue's split into the
/// default (write) set and the read set, as (vectors, read set's size): `write_queues` for
/// writes, at least one, and the rest, at least one, for reads; one set for all when
/// `write_queues` is 0 or there is a single vector. No vector at all still counts one.
fn split_irq_sets(nrirqs: u32, write_queues: u32) -> (u32, u32) {
    match nrirqs {
        0 | 1 => (1, 0),
        _ if write_queues == 0 => (nrirqs, 0),
        _ if write_queues >= nrirqs => (nrirqs, 1),
        _ => (nrirqs, nrirqs - write_queues),
    }
}

/// The interrupt core's `calc_sets`, called again with fewer vectors when the PCI core cannot
/// allocate them all: the last call's split stands.
///
/// # Safety
///
/// Called by the interrupt core during `alloc_vectors`, with its `irq_affinity`, whose
/// private data is an [`IrqSets`].
unsafe extern "C" fn calc_irq_sets(affinity: *mut bindings::irq_affinity, nrirqs: c_uint) {
    // SAFETY: The caller's promise: both are valid and nothing else uses them meanwhile.
    let (affinity, sets) = unsafe { (&mut *affinity, &mut *(*affinity).priv_.cast::<IrqSets>()) };
    let (nrirqs, read) = split_irq_sets(nrirqs, sets.write_queues);
    affinity.set_size[bindings::hctx_type_HCTX_TYPE_DEFAULT as usize] = nrirqs - read;
    affinity.set_size[bindings::hctx_type_HCTX_TYPE_READ as usize] = read;
    affinity.nr_sets = if read > 0 { 2 } else { 1 };
    sets.read_queues = read;
}

/// The alignment `memremap_pages` needs, which peer-to-peer memory is mapped with
/// (`memremap_compat_align`).
pub(crate) fn memremap_alignment() -> u64 {
    // SAFETY: Reads an architecture constant (a power of two).
    (unsafe { ffi::nva_memremap_compat_align() } as u64).max(1)
}

#[kunit_tests(nvme_adaptive_pci)]
mod tests {
    use super::split_irq_sets;

    #[test]
    fn irq_sets_as_pci_c() {
        // One set for all: no write queues asked for, or a single vector (or none).
        assert_eq!(split_irq_sets(8, 0), (8, 0));
        assert_eq!(split_irq_sets(1, 4), (1, 0));
        assert_eq!(split_irq_sets(0, 4), (1, 0));
        // The write queues asked for, the rest for reads, at least one each.
        assert_eq!(split_irq_sets(8, 3), (8, 5));
        assert_eq!(split_irq_sets(2, 1), (2, 1));
        assert_eq!(split_irq_sets(4, 4), (4, 1));
        assert_eq!(split_irq_sets(4, 9), (4, 1));
    }
}
