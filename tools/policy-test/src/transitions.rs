//! One test per transition of the policy state machine.

use crate::policy::*;

const US: u64 = 1_000;

fn params() -> Params {
    Params {
        enabled: true,
        sample_size: 16,
        target_batch: 8,
        max_delay_ns: 100 * US,
        backoff_ns: 1_000 * US,
        backoff_max_ns: 10_000 * US,
        backoff_growth: 2,
        episode_polls: 1000,
    }
}

/// Feeds interrupts of `per_irq` completions every `every` ns until the sample completes.
/// Returns the decision of the interrupt that completed it and the time after it.
fn sample(pol: &mut Policy, start: u64, every: u64, per_irq: u32, inflight: u32) -> (Action, u64) {
    let p = params();
    let mut now = start;
    assert_eq!(pol.on_irq(now, per_irq, inflight, &p), Action::Stay, "the first IRQ opens the sample");
    loop {
        now += every;
        let action = pol.on_irq(now, per_irq, inflight, &p);
        if action != Action::Stay || pol.stage() != Stage::Sample {
            return (action, now);
        }
        if now > start + 1_000_000 * US {
            return (action, now);
        }
    }
}

/// Puts a policy into the Poll stage with a 1 us completion gap (wait 8 us).
fn polling() -> (Policy, u64) {
    let mut pol = Policy::new();
    let (action, now) = sample(&mut pol, 1_000 * US, 4 * US, 4, 32);
    assert_eq!(action, Action::StartPolling { wait_ns: 8 * US });
    (pol, now)
}

#[test]
fn dense_queue_starts_polling_with_a_wait_sized_for_one_batch() {
    let mut pol = Policy::new();
    // 4 completions every 4 us: a gap of 1 us; a batch of 8 takes 8 us.
    let (action, _) = sample(&mut pol, 0, 4 * US, 4, 32);
    assert_eq!(action, Action::StartPolling { wait_ns: 8 * US });
    assert_eq!(pol.stage(), Stage::Poll);
    assert_eq!(rate_per_sec(pol.gap_ns()), 1_000_000);
}

#[test]
fn sample_waits_for_sample_size_completions() {
    let p = params();
    let mut pol = Policy::new();
    assert_eq!(pol.on_irq(0, 4, 32, &p), Action::Stay);
    // 4 + 4 + 4 = 12 < 16 counted completions: no decision yet.
    for i in 1..=3 {
        assert_eq!(pol.on_irq(i * 4 * US, 4, 32, &p), Action::Stay);
    }
    assert_eq!(rate_per_sec(pol.gap_ns()), 0, "no estimate before the sample is complete");
    assert!(matches!(pol.on_irq(16 * US, 4, 32, &p), Action::StartPolling { .. }));
}

#[test]
fn sparse_queue_stays_on_interrupts() {
    let mut pol = Policy::new();
    // One completion every 50 us: a batch of 8 would take 400 us, beyond the 100 us window.
    let (action, _) = sample(&mut pol, 0, 50 * US, 1, 32);
    assert_eq!(action, Action::Stay);
    assert_eq!(pol.stage(), Stage::Sample);
    assert_eq!(rate_per_sec(pol.gap_ns()), 20_000);
}

#[test]
fn interrupts_that_already_reap_a_batch_each_stay_on() {
    let mut pol = Policy::new();
    // 8 completions per interrupt every 8 us: dense (a 1 us gap), but each interrupt already
    // reaps a whole batch, so polling has nothing to save.
    let (action, _) = sample(&mut pol, 0, 8 * US, 8, 64);
    assert_eq!(action, Action::Stay);
    assert_eq!(pol.stage(), Stage::Sample);
    assert_eq!(rate_per_sec(pol.gap_ns()), 1_000_000);
    // One fewer per interrupt and the same rate: polling pays.
    let mut pol = Policy::new();
    let (action, _) = sample(&mut pol, 0, 7 * US, 7, 64);
    assert!(matches!(action, Action::StartPolling { .. }), "{action:?}");
}

#[test]
fn dense_queue_without_a_batch_in_flight_stays_on_interrupts() {
    let mut pol = Policy::new();
    let (action, _) = sample(&mut pol, 0, 4 * US, 4, 7);
    assert_eq!(action, Action::Stay);
    assert_eq!(pol.stage(), Stage::Sample);
}

#[test]
fn idle_gap_restarts_the_sample() {
    let p = params();
    let mut pol = Policy::new();
    assert_eq!(pol.on_irq(0, 4, 32, &p), Action::Stay);
    assert_eq!(pol.on_irq(4 * US, 4, 32, &p), Action::Stay);
    // Silence for more than 8 windows: the burst that follows is measured on its own.
    let mut now = 4 * US + 8 * 100 * US + 1;
    assert_eq!(pol.on_irq(now, 4, 32, &p), Action::Stay);
    let mut decided = None;
    for _ in 0..4 {
        now += 4 * US;
        let a = pol.on_irq(now, 4, 32, &p);
        if a != Action::Stay {
            decided = Some(a);
            break;
        }
    }
    assert_eq!(decided, Some(Action::StartPolling { wait_ns: 8 * US }));
}

#[test]
fn disabled_policy_never_polls() {
    let mut p = params();
    p.enabled = false;
    let mut pol = Policy::new();
    for i in 0..1000 {
        assert_eq!(pol.on_irq(i * US, 32, 128, &p), Action::Stay);
    }
    assert_eq!(pol.stage(), Stage::Sample);
}

#[test]
fn poll_that_keeps_up_rearms_with_the_updated_rate() {
    let p = params();
    let (mut pol, now) = polling();
    // 8 us later, 8 completions: exactly as predicted.
    assert_eq!(pol.on_timer(now + 8 * US, 8, 24, &p), Action::Rearm { wait_ns: 8 * US });
    // 8 us later, 16 completions: the rate doubled; the average moves a quarter of the way.
    let a = pol.on_timer(now + 16 * US, 16, 24, &p);
    // gap = (3 * 1000 + 500) / 4 = 875 ns; wait = 8 * 875.
    assert_eq!(a, Action::Rearm { wait_ns: 7_000 });
    assert_eq!(pol.stage(), Stage::Poll);
}

/// Empty polls every `wait` with `inflight` outstanding until the episode ends.
fn starve(pol: &mut Policy, mut now: u64, inflight: u32) -> (Action, u64) {
    let p = params();
    loop {
        now += pol.wait_ns();
        match pol.on_timer(now, 0, inflight, &p) {
            Action::Rearm { .. } => assert!(now < 1_000_000 * US, "never stalled"),
            other => return (other, now),
        }
    }
}

#[test]
fn short_silence_with_work_in_flight_is_tolerated() {
    let p = params();
    let (mut pol, now) = polling();
    // 24 in flight at 1 us apart should take 24 us: empty polls up to then are clumping.
    for i in 1..=3 {
        assert_eq!(pol.on_timer(now + i * 8 * US, 0, 24, &p), Action::Rearm { wait_ns: 8 * US });
    }
    // A clump arrives: the rate is measured over the whole 32 us.
    assert_eq!(pol.on_timer(now + 32 * US, 32, 24, &p), Action::Rearm { wait_ns: 8 * US });
}

#[test]
fn silence_longer_than_the_work_in_flight_is_a_stall() {
    let p = params();
    let (mut pol, now) = polling();
    let (action, at) = starve(&mut pol, now, 24);
    assert_eq!(action, Action::StopPolling { ending: Ending::Stalled });
    // 32 us of silence, 4 waits: 4 times behind.
    assert_eq!(at, now + 32 * US);
    assert_eq!(pol.stage(), Stage::Backoff);
    assert_eq!(pol.backoff_ns(), 4 * p.backoff_ns);
    assert_eq!(pol.failures(), 1);
}

#[test]
fn silence_tolerance_is_capped_for_deep_queues() {
    let (mut pol, now) = polling();
    // 4096 in flight would be 4 ms of work; silence is cut off after 8 windows of 100 us.
    let (action, at) = starve(&mut pol, now, 4096);
    assert_eq!(action, Action::StopPolling { ending: Ending::Stalled });
    assert_eq!(at, now + 808 * US);
    let p = params();
    assert_eq!(pol.backoff_ns(), (MAX_BEHIND * p.backoff_ns).min(p.backoff_max_ns));
}

#[test]
fn backoff_grows_on_repeated_failures_and_is_capped() {
    let p = params();
    let mut pol = Policy::new();
    let mut now = 0;
    let mut backoffs = Vec::new();
    for _ in 0..6 {
        let (action, t) = sample(&mut pol, now, 4 * US, 4, 32);
        assert!(matches!(action, Action::StartPolling { .. }));
        let (action, t) = starve(&mut pol, t, 24);
        assert_eq!(action, Action::StopPolling { ending: Ending::Stalled });
        backoffs.push(pol.backoff_ns());
        now = t + pol.backoff_ns();
        // The backoff holds until it expires.
        assert_eq!(pol.on_irq(now - 1, 4, 32, &p), Action::Stay);
        assert_eq!(pol.stage(), Stage::Backoff);
    }
    // 4 behind: 4 ms, then doubling per failure, capped at 10 ms.
    assert_eq!(backoffs, [4_000, 8_000, 10_000, 10_000, 10_000, 10_000].map(|us| us * US));
}

#[test]
fn backoff_expiry_returns_to_sampling() {
    let p = params();
    let (mut pol, now) = polling();
    let (_, t) = starve(&mut pol, now, 24);
    let until = t + pol.backoff_ns();
    assert_eq!(pol.on_irq(until - 1, 4, 32, &p), Action::Stay);
    assert_eq!(pol.stage(), Stage::Backoff);
    assert_eq!(pol.on_irq(until, 4, 32, &p), Action::Stay);
    assert_eq!(pol.stage(), Stage::Sample);
    let (action, _) = sample(&mut pol, until + 4 * US, 4 * US, 4, 32);
    assert!(matches!(action, Action::StartPolling { .. }));
}

#[test]
fn an_episode_that_paid_off_resets_the_failure_count() {
    let p = params();
    let mut pol = Policy::new();
    let (_, t) = sample(&mut pol, 0, 4 * US, 4, 32);
    let (_, t) = starve(&mut pol, t, 24);
    assert_eq!(pol.failures(), 1);
    let t = t + pol.backoff_ns();
    pol.on_irq(t, 4, 32, &p);
    let (action, mut t) = sample(&mut pol, t + 4 * US, 4 * US, 4, 32);
    assert!(matches!(action, Action::StartPolling { .. }));
    for _ in 0..MIN_PRODUCTIVE_POLLS {
        t += 8 * US;
        assert!(matches!(pol.on_timer(t, 8, 24, &p), Action::Rearm { .. }));
    }
    let (action, _) = starve(&mut pol, t, 24);
    assert_eq!(action, Action::StopPolling { ending: Ending::Stalled });
    assert_eq!(pol.failures(), 0);
    assert_eq!(pol.backoff_ns(), 4 * p.backoff_ns, "no growth after a good episode");
}

#[test]
fn idle_after_a_good_episode_returns_straight_to_sampling() {
    let p = params();
    let (mut pol, mut now) = polling();
    for _ in 0..MIN_PRODUCTIVE_POLLS {
        now += 8 * US;
        assert!(matches!(pol.on_timer(now, 8, 24, &p), Action::Rearm { .. }));
    }
    // Everything reaped: the submitter may refill, so one more look.
    now += 8 * US;
    assert!(matches!(pol.on_timer(now, 8, 0, &p), Action::Rearm { .. }));
    let a = pol.on_timer(now + 8 * US, 0, 0, &p);
    assert_eq!(a, Action::StopPolling { ending: Ending::Idle });
    assert_eq!(pol.stage(), Stage::Sample);
    assert_eq!(pol.backoff_ns(), 0);
}

#[test]
fn idle_right_after_starting_backs_off() {
    let p = params();
    let (mut pol, now) = polling();
    let a = pol.on_timer(now + 8 * US, 0, 0, &p);
    assert_eq!(a, Action::StopPolling { ending: Ending::Idle });
    assert_eq!(pol.stage(), Stage::Backoff);
    assert_eq!(pol.backoff_ns(), p.backoff_ns);
}

#[test]
fn slow_but_steady_rate_beyond_the_window_stops_polling() {
    let p = params();
    let (mut pol, mut now) = polling();
    // The gap grows to 20 us; each poll reaps what the (lagging) estimate predicts, but the
    // batch wait crosses 100 us and the episode ends.
    let mut ended = None;
    for _ in 0..50 {
        let wait = pol.wait_ns();
        now += wait;
        let reaped = (wait / (20 * US)).max(1) as u32;
        match pol.on_timer(now, reaped, 24, &p) {
            Action::Rearm { wait_ns } => assert!(wait_ns <= p.max_delay_ns),
            Action::StopPolling { ending } => {
                ended = Some(ending);
                break;
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(ended, Some(Ending::Stalled));
}

#[test]
fn episode_is_capped_and_resamples_without_backoff() {
    let mut p = params();
    p.episode_polls = 16;
    let (mut pol, mut now) = polling();
    for _ in 0..15 {
        now += 8 * US;
        assert!(matches!(pol.on_timer(now, 8, 24, &p), Action::Rearm { .. }));
    }
    let a = pol.on_timer(now + 8 * US, 8, 24, &p);
    assert_eq!(a, Action::StopPolling { ending: Ending::Capped });
    assert_eq!(pol.stage(), Stage::Sample);
    assert_eq!(pol.backoff_ns(), 0);
}

#[test]
fn switching_adaptive_off_ends_polling_at_the_next_poll() {
    let mut p = params();
    let (mut pol, now) = polling();
    p.enabled = false;
    let a = pol.on_timer(now + 8 * US, 8, 24, &p);
    assert_eq!(a, Action::StopPolling { ending: Ending::Disabled });
    assert_eq!(pol.stage(), Stage::Sample);
    assert_eq!(pol.on_irq(now + 20 * US, 8, 24, &p), Action::Stay);
}

#[test]
fn interrupt_while_polling_changes_nothing() {
    let p = params();
    let (mut pol, now) = polling();
    assert_eq!(pol.on_irq(now + US, 4, 32, &p), Action::Stay);
    assert_eq!(pol.stage(), Stage::Poll);
    assert!(matches!(pol.on_timer(now + 8 * US, 8, 24, &p), Action::Rearm { .. }));
}

#[test]
fn timer_outside_polling_never_leaves_the_vector_masked() {
    let p = params();
    let mut pol = Policy::new();
    assert_eq!(
        pol.on_timer(10, 0, 0, &p),
        Action::StopPolling { ending: Ending::Disabled }
    );
    assert_eq!(pol.stage(), Stage::Sample);
}

#[test]
fn abort_polling_reports_whether_the_vector_was_masked() {
    let (mut pol, _) = polling();
    assert!(pol.abort_polling());
    assert_eq!(pol.stage(), Stage::Sample);
    assert!(!pol.abort_polling());
}

#[test]
fn poll_waits_respect_the_minimum() {
    let mut pol = Policy::new();
    // 4 completions every 250 ns: 62.5 ns gap; a batch takes 500 ns, raised to 1 us.
    let (action, _) = sample(&mut pol, 0, 250, 4, 256);
    assert_eq!(action, Action::StartPolling { wait_ns: MIN_WAIT_NS });
}

#[test]
fn param_specs_are_consistent() {
    for spec in PARAM_SPECS {
        assert!(spec.min <= spec.default && spec.default <= spec.max, "{}", spec.name);
        assert!(spec.accepts(spec.default));
        assert!(!spec.accepts(spec.max.wrapping_add(1)) || spec.max == u32::MAX);
        assert!(spec.min == 0 || !spec.accepts(spec.min - 1));
    }
    let d = crate::defaults();
    assert!(d.enabled);
    assert_eq!(d.max_delay_ns, u64::from(PARAM_SPECS[param::MAX_DELAY_US].default) * 1000);
    assert!(d.backoff_ns <= d.backoff_max_ns);
    assert!(u64::from(PARAM_SPECS[param::MAX_DELAY_US].min) * 1000 >= MIN_WAIT_NS);
}
