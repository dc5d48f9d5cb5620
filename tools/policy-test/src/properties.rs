//! Invariants of the policy over random event sequences and random (valid) parameters.
//!
//! The harness follows the driver's protocol: it calls `on_timer` only while it holds an armed
//! timer, and it keeps the vector masked from `StartPolling` until `StopPolling`.

use crate::policy::*;
use crate::IdleCpu;
use proptest::prelude::*;

#[derive(Clone, Debug)]
enum Event {
    /// An interrupt after `dt` ns reaping `reaped`, leaving `inflight`.
    Irq {
        dt: u64,
        reaped: Reaped,
        inflight: u32,
    },
    /// The poll timer fires `late` ns after its requested wait.
    Timer {
        late: u64,
        reaped: Reaped,
        inflight: u32,
    },
    /// A runtime write of the adaptive switch.
    Toggle,
    /// Runtime writes of every parameter at once, to new valid values (the module reads each
    /// parameter afresh at every decision, whatever the queue is doing).
    Params(Params),
}

/// Up to 64 completions, some or all of them timed, each after up to 10 ms.
fn reaped() -> impl Strategy<Value = Reaped> {
    (0u32..64, 0u32..=100, 0u64..10_000_000).prop_map(|(count, timed_percent, latency)| {
        let timed = count * timed_percent / 100;
        Reaped {
            count,
            timed,
            latency_sum_ns: u64::from(timed) * latency,
        }
    })
}

fn event() -> impl Strategy<Value = Event> {
    prop_oneof![
        4 => (0u64..200_000, reaped(), 0u32..256)
            .prop_map(|(dt, reaped, inflight)| Event::Irq { dt, reaped, inflight }),
        4 => (0u64..300_000, reaped(), 0u32..256)
            .prop_map(|(late, reaped, inflight)| Event::Timer { late, reaped, inflight }),
        1 => Just(Event::Toggle),
        1 => params().prop_map(Event::Params),
    ]
}

fn in_range(index: usize) -> impl Strategy<Value = u32> {
    let spec = PARAM_SPECS[index];
    // Mostly small values (where the interesting transitions happen), sometimes the extremes.
    prop_oneof![
        3 => spec.min..=spec.max.min(spec.min.saturating_mul(16).max(spec.min + 16)),
        1 => Just(spec.min),
        1 => Just(spec.max),
    ]
}

fn params() -> impl Strategy<Value = Params> {
    (0..param::COUNT)
        .map(in_range)
        .collect::<Vec<_>>()
        .prop_map(|raw| Params::from_raw(raw.try_into().unwrap()))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn protocol_invariants_hold(p in params(), events in prop::collection::vec(event(), 1..400)) {
        let mut p = p;
        let mut pol = Policy::new();
        let mut now: u64 = 1_000_000;
        let mut masked = false;
        let mut armed_for: Option<u64> = None;
        let mut masks = 0u64;
        let mut unmasks = 0u64;

        for ev in events {
            match ev {
                Event::Toggle => p.enabled = !p.enabled,
                Event::Params(new) => p = new,
                Event::Irq { dt, reaped, inflight } => {
                    now += dt;
                    // A masked vector raises no interrupt.
                    if masked {
                        continue;
                    }
                    match pol.on_irq_idle(now, reaped, inflight, &p) {
                        Action::Stay => {}
                        Action::StartPolling { wait_ns } => {
                            prop_assert!(p.enabled, "polling started while disabled");
                            prop_assert!(u64::from(inflight) >= MIN_BATCH);
                            prop_assert!(wait_ns <= p.max_delay_ns, "wait {} > window {}", wait_ns, p.max_delay_ns);
                            prop_assert!(wait_ns >= MIN_WAIT_NS);
                            masked = true;
                            masks += 1;
                            armed_for = Some(wait_ns);
                        }
                        other => prop_assert!(false, "on_irq returned {:?}", other),
                    }
                }
                Event::Timer { late, reaped, inflight } => {
                    let Some(wait) = armed_for else { continue };
                    now += wait + late;
                    match pol.on_timer_idle(now, late, reaped, inflight, &p) {
                        Action::Rearm { wait_ns } => {
                            prop_assert!(p.enabled, "kept polling while disabled");
                            prop_assert!(inflight > 0 || reaped.count > 0, "kept polling an idle queue");
                            prop_assert!(wait_ns <= p.max_delay_ns, "wait {} > window {}", wait_ns, p.max_delay_ns);
                            prop_assert!(wait_ns >= MIN_WAIT_NS);
                            armed_for = Some(wait_ns);
                        }
                        Action::StopPolling { .. } => {
                            // Set only here, by the parameters in force now (a cap lowered
                            // later does not shorten a backoff already running).
                            prop_assert!(pol.backoff_ns() <= p.backoff_max_ns, "backoff {} > cap {}", pol.backoff_ns(), p.backoff_max_ns);
                            masked = false;
                            unmasks += 1;
                            armed_for = None;
                        }
                        other => prop_assert!(false, "on_timer returned {:?}", other),
                    }
                }
            }
            // Liveness: masked exactly while polling, and then the timer is armed.
            prop_assert_eq!(masked, pol.stage() == Stage::Poll);
            prop_assert_eq!(masked, armed_for.is_some());
            prop_assert_eq!(masks - unmasks, u64::from(masked), "unbalanced mask/unmask");
        }
        // Teardown leaves the vector unmasked.
        prop_assert_eq!(pol.abort_polling(), masked);
        prop_assert!(pol.stage() != Stage::Poll);
    }

    #[test]
    fn disabled_policy_never_masks(events in prop::collection::vec((0u64..100_000, 0u32..64, 0u32..512), 1..500)) {
        let mut p = crate::defaults();
        p.enabled = false;
        let mut pol = Policy::new();
        let mut now = 0;
        for (dt, reaped, inflight) in events {
            now += dt;
            let reaped = Reaped { count: reaped, timed: reaped, latency_sum_ns: u64::from(reaped) * 100_000 };
            prop_assert_eq!(pol.on_irq_idle(now, reaped, inflight, &p), Action::Stay);
        }
    }

    #[test]
    fn backoff_stays_within_the_cap_whatever_the_failures(
        p in params(),
        behind_polls in prop::collection::vec(0u32..4, 1..100),
    ) {
        let mut pol = Policy::new();
        let mut now = 0u64;
        for reaped_in_first_poll in behind_polls {
            // Drive a dense sample until polling starts (or give up if the budget forbids it).
            let mut started = None;
            let dense = Reaped { count: 32, timed: 32, latency_sum_ns: 32 * 200_000 };
            for _ in 0..=((p.sample_size as u64).max(BASELINE_MIN) / 32 + 2) {
                now += 1_000;
                if let Action::StartPolling { wait_ns } = pol.on_irq_idle(now, dense, p.target_batch.max(512), &p) {
                    started = Some(wait_ns);
                    break;
                }
            }
            let Some(wait) = started else { continue };
            now += wait;
            let first = Reaped { count: reaped_in_first_poll, ..Reaped::default() };
            let a = pol.on_timer_idle(now, 0, first, 64, &p);
            prop_assert!(matches!(a, Action::StopPolling { .. } | Action::Rearm { .. }), "on_timer returned {:?}", a);
            prop_assert!(pol.backoff_ns() <= p.backoff_max_ns);
            if pol.stage() == Stage::Poll {
                prop_assert!(pol.abort_polling());
            }
            now += pol.backoff_ns();
        }
    }
}
