//! The driver's `policy.rs`, compiled for the host exactly as the module compiles it, with its
//! host tests (which, being in this crate, see its `pub(crate)` items as the module does).
#![cfg_attr(not(test), no_std)]

#[path = "../../../policy.rs"]
#[allow(dead_code)]
mod policy;

#[cfg(test)]
mod grid;
#[cfg(test)]
mod model;
#[cfg(test)]
mod properties;
#[cfg(test)]
mod transitions;

/// The default parameters, as the module starts with them.
#[cfg(test)]
fn defaults() -> policy::Params {
    policy::Params::from_raw(policy::PARAM_SPECS.map(|s| s.default))
}

/// The policy's events on a CPU that is otherwise idle (the unit tests' usual host).
#[cfg(test)]
trait IdleCpu {
    fn on_irq_idle(
        &mut self,
        now: u64,
        reaped: policy::Reaped,
        inflight: u32,
        p: &policy::Params,
    ) -> policy::Action;
    fn on_timer_idle(
        &mut self,
        now: u64,
        late_ns: u64,
        reaped: policy::Reaped,
        inflight: u32,
        p: &policy::Params,
    ) -> policy::Action;
}

#[cfg(test)]
impl IdleCpu for policy::Policy {
    fn on_irq_idle(
        &mut self,
        now: u64,
        reaped: policy::Reaped,
        inflight: u32,
        p: &policy::Params,
    ) -> policy::Action {
        self.on_irq(now, reaped, inflight, p, || Some(now))
    }

    fn on_timer_idle(
        &mut self,
        now: u64,
        late_ns: u64,
        reaped: policy::Reaped,
        inflight: u32,
        p: &policy::Params,
    ) -> policy::Action {
        self.on_timer(now, late_ns, reaped, inflight, p, || Some(now))
    }
}
