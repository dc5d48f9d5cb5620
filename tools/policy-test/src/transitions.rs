//! One test per transition of the policy state machine, and per rule that sizes a poll.

use crate::policy::*;

const US: u64 = 1_000;

/// Small samples, so tests reach decisions quickly; the budget and caps are the defaults'.
fn params() -> Params {
    Params {
        sample_size: 16,
        backoff_ns: 1_000 * US,
        backoff_max_ns: 10_000 * US,
        episode_polls: 1000,
        ..crate::defaults()
    }
}

/// `count` completions that each took `latency` from submission.
fn timed(count: u32, latency: u64) -> Reaped {
    Reaped {
        count,
        timed: count,
        latency_sum_ns: u64::from(count) * latency,
    }
}

/// The dense stream most tests use: 4 completions every 4 us (a 1 us gap), each after 20 us in
/// the device, 32 left in flight. Budget 25 % of 20 us: a poll interval of 10 us, 10 per batch.
const EVERY: u64 = 4 * US;
const LATENCY: u64 = 20 * US;
const WAIT: u64 = 10 * US;

/// Feeds interrupts of `reaped` every `every` ns until the policy decides something other than
/// staying, or a second of them went by. Returns that decision and its time.
fn sample(
    pol: &mut Policy,
    start: u64,
    every: u64,
    reaped: Reaped,
    inflight: u32,
) -> (Action, u64) {
    let p = params();
    let mut now = start;
    loop {
        let action = pol.on_irq(now, reaped, inflight, &p);
        if action != Action::Stay || now > start + 1_000_000 * US {
            return (action, now);
        }
        now += every;
    }
}

/// A policy polling the dense stream.
fn polling() -> (Policy, u64) {
    let mut pol = Policy::new();
    let (action, now) = sample(&mut pol, 1_000 * US, EVERY, timed(4, LATENCY), 32);
    assert_eq!(action, Action::StartPolling { wait_ns: WAIT });
    (pol, now)
}

#[test]
fn dense_queue_polls_with_a_wait_sized_by_the_latency_budget() {
    let (pol, _) = polling();
    assert_eq!(pol.stage(), Stage::Poll);
    let est = pol.estimates();
    assert_eq!(est.latency_ns, LATENCY);
    assert_eq!(rate_per_sec(est.gap_ns), 1_000_000);
    assert_eq!(pol.batch(), 10);
}

#[test]
fn a_slower_device_gets_a_longer_wait() {
    // Ten times the latency at the same rate: ten times the budget, capped by the depth.
    let mut pol = Policy::new();
    let (action, _) = sample(&mut pol, 0, EVERY, timed(4, 10 * LATENCY), 128);
    assert_eq!(action, Action::StartPolling { wait_ns: 100 * US });
    assert_eq!(pol.batch(), 100);
}

#[test]
fn first_episode_waits_for_a_baseline_of_timed_completions() {
    let p = params();
    let mut pol = Policy::new();
    let mut now = 0;
    let mut counted = 0;
    loop {
        let action = pol.on_irq(now, timed(4, LATENCY), 32, &p);
        if action != Action::Stay {
            break;
        }
        counted += 4;
        now += EVERY;
    }
    // The opening interrupt only starts the sample (its 4 arrived before it); the deciding
    // one completes BASELINE_MIN timed completions.
    assert_eq!(counted, BASELINE_MIN);
}

#[test]
fn untimed_completions_fall_back_to_littles_law() {
    let mut pol = Policy::new();
    // 36 on the device at a 1 us gap: 36 us by Little's law.
    let (action, _) = sample(
        &mut pol,
        0,
        EVERY,
        Reaped {
            count: 4,
            ..Reaped::default()
        },
        32,
    );
    assert!(matches!(action, Action::StartPolling { .. }), "{action:?}");
    assert_eq!(pol.estimates().latency_ns, 36 * US);
}

#[test]
fn sparse_queue_stays_on_interrupts() {
    let mut pol = Policy::new();
    // One completion every 50 us: a poll within the 5 us budget would collect nothing.
    let (action, _) = sample(&mut pol, 0, 50 * US, timed(1, LATENCY), 32);
    assert_eq!(action, Action::Stay);
    assert_eq!(pol.stage(), Stage::Sample);
    assert_eq!(rate_per_sec(pol.estimates().gap_ns), 20_000);
}

#[test]
fn a_lone_completion_skips_the_policy_only_while_sampling() {
    let p = params();
    let pol = Policy::new();
    // At most one command on the device: nothing to batch, no clock read needed.
    assert!(pol.skip_lone_irq(1, 0));
    assert!(pol.skip_lone_irq(0, 0));
    // A second completion, reaped now or still in flight, is something to batch.
    assert!(!pol.skip_lone_irq(2, 0));
    assert!(!pol.skip_lone_irq(1, 1));
    // A polling queue's policy sees every interrupt that slips through ...
    let (mut pol, now) = polling();
    assert!(!pol.skip_lone_irq(1, 0));
    // ... and a backing-off one needs the clock to see its backoff end.
    let (_, t) = starve(&mut pol, now, 30);
    assert_eq!(pol.stage(), Stage::Backoff);
    assert!(!pol.skip_lone_irq(1, 0));
    assert_eq!(
        pol.on_irq(t + pol.backoff_ns(), timed(1, LATENCY), 0, &p),
        Action::Stay
    );
    assert_eq!(pol.stage(), Stage::Sample);
    assert!(pol.skip_lone_irq(1, 0));
}

#[test]
fn interrupts_that_already_reap_a_batch_each_stay_on() {
    let mut pol = Policy::new();
    // 8 per interrupt: a poll of 10 would not save enough to pay for masking.
    let (action, _) = sample(&mut pol, 0, 8 * US, timed(8, LATENCY), 32);
    assert_eq!(action, Action::Stay);
    assert_eq!(pol.stage(), Stage::Sample);
    // 6 per interrupt at the same rate: polling pays.
    let mut pol = Policy::new();
    let (action, _) = sample(&mut pol, 0, 6 * US, timed(6, LATENCY), 32);
    assert!(matches!(action, Action::StartPolling { .. }), "{action:?}");
}

#[test]
fn a_sample_ends_after_half_the_commands_in_flight() {
    // The defaults' sample of 32 completions, on a queue holding 16 (14 left at each interrupt
    // of 2): the sample ends after 8, while the burst is still in flight.
    let p = crate::defaults();
    let mut pol = Policy::new();
    let mut now = 1_000 * US;
    pol.on_irq(now, timed(2, LATENCY), 14, &p);
    for _ in 0..4 {
        assert_eq!(pol.estimates().gap_ns, 0, "the sample is still open");
        now += EVERY;
        pol.on_irq(now, timed(2, LATENCY), 14, &p);
    }
    assert_eq!(pol.estimates().gap_ns, 2 * US);
    assert_eq!(pol.estimates().depth_x16, 16 * 16);
}

#[test]
fn dense_queue_without_a_batch_in_flight_stays_on_interrupts() {
    let mut pol = Policy::new();
    let (action, _) = sample(&mut pol, 0, EVERY, timed(4, LATENCY), 9);
    assert_eq!(action, Action::Stay);
}

#[test]
fn timer_slack_beyond_the_budget_keeps_interrupts() {
    let p = params();
    let (mut pol, now) = polling();
    // The timer fires 12 us late: a poll interval alone exceeds the 5 us budget twice over.
    let a = pol.on_timer(
        now + WAIT + 12 * US,
        12 * US,
        timed(22, LATENCY + 11 * US),
        24,
        &p,
    );
    assert_eq!(
        a,
        Action::StopPolling {
            ending: Ending::Stalled
        }
    );
    assert_eq!(pol.estimates().slack_ns, 12 * US);
}

#[test]
fn a_queue_polls_again_once_the_timer_is_punctual() {
    let p = params();
    let (mut pol, now) = polling();
    // One poll 2 ms late (a loaded host) ends the episode: no wait fits the budget.
    let late = now + WAIT + 2_000 * US;
    let a = pol.on_timer(late, 2_000 * US, timed(22, LATENCY), 24, &p);
    assert!(matches!(
        a,
        Action::StopPolling {
            ending: Ending::Stalled
        }
    ));
    // On interrupts after the backoff nothing measures the timer: its lateness relaxes, and
    // the dense stream is polled again.
    let until = late + pol.backoff_ns();
    let (action, _) = sample(&mut pol, until, EVERY, timed(4, LATENCY), 32);
    assert!(matches!(action, Action::StartPolling { .. }));
    assert!(pol.estimates().slack_ns < WAIT);
}

#[test]
fn a_device_slower_than_the_idle_floor_is_sampled_and_polled() {
    // 100 ms per command at QD 30: one completion every 3.5 ms, longer than the idle floor.
    let mut pol = Policy::new();
    let slow = timed(1, 100_000 * US);
    let (action, _) = sample(&mut pol, 1_000 * US, 3_500 * US, slow, 30);
    assert!(matches!(action, Action::StartPolling { .. }));
    assert_eq!(pol.estimates().latency_ns, 100_000 * US);
}

#[test]
fn idle_gap_restarts_the_sample() {
    let p = params();
    let mut pol = Policy::new();
    let (_, now) = sample(&mut pol, 0, EVERY, timed(4, LATENCY), 32);
    assert!(pol.abort_polling());
    // Back on interrupts with a baseline: a sample of 16 decides. Silence of more than eight
    // latencies (at least IDLE_FLOOR_NS) in the middle restarts it, so the sample after it
    // takes 16 more.
    let mut now = now + EVERY;
    for _ in 0..2 {
        assert_eq!(pol.on_irq(now, timed(4, LATENCY), 32, &p), Action::Stay);
        now += EVERY;
    }
    now += IDLE_FLOOR_NS + 1;
    let (action, decided) = sample(&mut pol, now, EVERY, timed(4, LATENCY), 32);
    assert!(matches!(action, Action::StartPolling { .. }));
    assert_eq!(decided, now + 4 * EVERY);
}

#[test]
fn disabled_policy_never_polls() {
    let mut p = params();
    p.enabled = false;
    let mut pol = Policy::new();
    for i in 0..1000 {
        assert_eq!(
            pol.on_irq(i * US, timed(32, LATENCY), 128, &p),
            Action::Stay
        );
    }
    assert_eq!(pol.stage(), Stage::Sample);
}

#[test]
fn poll_that_keeps_up_rearms_with_the_updated_rate() {
    let p = params();
    let (mut pol, now) = polling();
    // Exactly as predicted: 10 completions, each waited half the interval on average.
    let a = pol.on_timer(now + WAIT, 0, timed(10, LATENCY + WAIT / 2), 22, &p);
    assert_eq!(a, Action::Rearm { wait_ns: WAIT });
    // Twice the rate: the mean reaped per poll moves a quarter of the way (12.5 per 10 us, an
    // 800 ns gap), the batch follows.
    let a = pol.on_timer(now + 2 * WAIT, 0, timed(20, LATENCY + WAIT / 2), 22, &p);
    assert_eq!(pol.estimates().gap_ns, 800);
    assert!(matches!(a, Action::Rearm { .. }));
}

#[test]
fn polls_that_add_more_than_the_budget_shorten_the_wait() {
    let p = params();
    let (mut pol, mut now) = polling();
    let mut waits = Vec::new();
    for _ in 0..8 {
        now += pol.wait_ns();
        // Each completion waited 10 us more than on interrupts: twice the budget.
        match pol.on_timer(now, 0, timed(10, LATENCY + 10 * US), 22, &p) {
            Action::Rearm { wait_ns } => waits.push(wait_ns),
            Action::StopPolling { ending } => {
                assert_eq!(ending, Ending::Stalled, "no batch fits the budget any more");
                break;
            }
            other => panic!("{other:?}"),
        }
    }
    assert!(waits.windows(2).all(|w| w[1] <= w[0]), "{waits:?}");
    assert!(pol.estimates().fit_x256 < 256);
}

#[test]
fn polls_that_add_less_than_the_budget_lengthen_the_wait() {
    let p = params();
    let (mut pol, mut now) = polling();
    for _ in 0..8 {
        now += pol.wait_ns();
        // Completions arrive just before each poll: they wait almost nothing.
        let a = pol.on_timer(now, 0, timed(10, LATENCY + US), 22, &p);
        assert!(matches!(a, Action::Rearm { .. }));
    }
    assert!(pol.estimates().fit_x256 > 256);
    assert!(pol.wait_ns() > WAIT);
}

#[test]
fn a_capped_wait_does_not_wind_up_its_correction() {
    let mut p = params();
    p.target_batch = 4;
    let (mut pol, now) = polling();
    let a = pol.on_timer(now + WAIT, 0, timed(10, LATENCY + US), 22, &p);
    assert_eq!(a, Action::Rearm { wait_ns: 4 * US });
    let fit = pol.estimates().fit_x256;
    for i in 1..=4 {
        let a = pol.on_timer(now + WAIT + i * 4 * US, 0, timed(4, LATENCY + US), 22, &p);
        assert_eq!(a, Action::Rearm { wait_ns: 4 * US });
    }
    assert_eq!(
        pol.estimates().fit_x256,
        fit,
        "the cap, not the budget, limits the wait"
    );
}

/// Empty polls with `inflight` outstanding until the episode ends.
fn starve(pol: &mut Policy, mut now: u64, inflight: u32) -> (Action, u64) {
    let p = params();
    loop {
        now += pol.wait_ns();
        match pol.on_timer(now, 0, Reaped::default(), inflight, &p) {
            Action::Rearm { .. } => assert!(now < 1_000_000 * US, "never stalled"),
            other => return (other, now),
        }
    }
}

/// [`starve`] until the episode ends, which must be as stalled; returns the time it ended.
fn stall(pol: &mut Policy, now: u64, inflight: u32) -> u64 {
    let (action, at) = starve(pol, now, inflight);
    assert_eq!(
        action,
        Action::StopPolling {
            ending: Ending::Stalled
        }
    );
    at
}

#[test]
fn short_silence_with_work_in_flight_is_tolerated() {
    let p = params();
    let (mut pol, now) = polling();
    // 30 in flight at 1 us apart should take 30 us: empty polls up to then are clumping.
    for i in 1..=2 {
        let a = pol.on_timer(now + i * WAIT, 0, Reaped::default(), 30, &p);
        assert_eq!(a, Action::Rearm { wait_ns: WAIT });
    }
    let a = pol.on_timer(now + 3 * WAIT, 0, timed(30, LATENCY + WAIT / 2), 2, &p);
    assert!(matches!(a, Action::Rearm { .. }), "{a:?}");
}

#[test]
fn silence_longer_than_the_work_in_flight_is_a_stall() {
    let p = params();
    let (mut pol, now) = polling();
    let at = stall(&mut pol, now, 30);
    // 30 us of work in flight and one poll interval tolerated: 50 us of silence, 5 waits, is
    // 5 times behind.
    assert_eq!(at, now + 5 * WAIT);
    assert_eq!(pol.stage(), Stage::Backoff);
    assert_eq!(pol.backoff_ns(), 5 * p.backoff_ns);
    assert_eq!(pol.failures(), 1);
}

#[test]
fn nothing_in_flight_is_due_before_one_service_latency() {
    let (mut pol, now) = polling();
    // 3 in flight at the 1 us gap would be 3 us of work, but none completes sooner than the
    // device's 20 us: 20 us and one 10 us poll interval of silence are tolerated.
    let at = stall(&mut pol, now, 3);
    assert_eq!(at, now + 4 * WAIT);
}

#[test]
fn silence_tolerance_is_capped_for_deep_queues() {
    let (mut pol, now) = polling();
    // 4096 in flight would be 4 ms of work; silence is cut off after 8 latencies (the 1 ms
    // floor before a longer latency is known) and one poll interval.
    let at = stall(&mut pol, now, 4096);
    assert_eq!(at, now + 1_020 * US);
    let p = params();
    assert_eq!(
        pol.backoff_ns(),
        (MAX_BEHIND * p.backoff_ns).min(p.backoff_max_ns)
    );
}

#[test]
fn backoff_grows_on_repeated_failures_and_is_capped() {
    let mut pol = Policy::new();
    let mut now = 0;
    let mut backoffs = Vec::new();
    for _ in 0..6 {
        let (action, t) = sample(&mut pol, now, EVERY, timed(4, LATENCY), 32);
        assert!(matches!(action, Action::StartPolling { .. }));
        let t = stall(&mut pol, t, 30);
        backoffs.push(pol.backoff_ns());
        // The backoff holds until it expires.
        now = busy_backoff(&mut pol, t);
    }
    // 5 behind: 5 ms, then doubling per failure, capped at 10 ms.
    assert_eq!(
        backoffs,
        [5_000, 10_000, 10_000, 10_000, 10_000, 10_000].map(|us| us * US)
    );
}

/// Interrupts of the dense stream from `from` while the backoff lasts, none of which ends it;
/// returns when it ends.
fn busy_backoff(pol: &mut Policy, from: u64) -> u64 {
    let p = params();
    let until = from + pol.backoff_ns();
    let mut now = from + EVERY;
    while now < until {
        assert_eq!(pol.on_irq(now, timed(4, LATENCY), 32, &p), Action::Stay);
        assert_eq!(pol.stage(), Stage::Backoff);
        now += EVERY;
    }
    until
}

#[test]
fn backoff_expiry_returns_to_sampling() {
    let p = params();
    let (mut pol, now) = polling();
    let (_, t) = starve(&mut pol, now, 30);
    let until = busy_backoff(&mut pol, t);
    assert_eq!(pol.on_irq(until, timed(4, LATENCY), 32, &p), Action::Stay);
    assert_eq!(pol.stage(), Stage::Sample);
    let (action, _) = sample(&mut pol, until + EVERY, EVERY, timed(4, LATENCY), 32);
    assert!(matches!(action, Action::StartPolling { .. }));
}

/// Polls that each collect what was predicted, `n` of them.
fn keep_up(pol: &mut Policy, mut now: u64, n: u32) -> u64 {
    let p = params();
    for _ in 0..n {
        now += pol.wait_ns();
        let a = pol.on_timer(now, 0, timed(10, LATENCY + WAIT / 2), 22, &p);
        assert!(matches!(a, Action::Rearm { .. }), "{a:?}");
    }
    now
}

#[test]
fn an_episode_that_paid_off_resets_the_failure_count() {
    let p = params();
    let (mut pol, t) = polling();
    let (_, t) = starve(&mut pol, t, 30);
    assert_eq!(pol.failures(), 1);
    let t = t + pol.backoff_ns();
    pol.on_irq(t, timed(4, LATENCY), 32, &p);
    let (action, t) = sample(&mut pol, t + EVERY, EVERY, timed(4, LATENCY), 32);
    assert!(matches!(action, Action::StartPolling { .. }));
    let t = keep_up(&mut pol, t, MIN_PRODUCTIVE_POLLS);
    stall(&mut pol, t, 30);
    assert_eq!(pol.failures(), 0);
}

#[test]
fn idle_after_a_good_episode_returns_straight_to_sampling() {
    let p = params();
    let (mut pol, now) = polling();
    let now = keep_up(&mut pol, now, MIN_PRODUCTIVE_POLLS);
    // Everything reaped: the submitter may refill, so one more look.
    let a = pol.on_timer(now + WAIT, 0, timed(10, LATENCY + WAIT / 2), 0, &p);
    assert!(matches!(a, Action::Rearm { .. }));
    let a = pol.on_timer(now + 2 * WAIT, 0, Reaped::default(), 0, &p);
    assert_eq!(
        a,
        Action::StopPolling {
            ending: Ending::Idle
        }
    );
    assert_eq!(pol.stage(), Stage::Sample);
    assert_eq!(pol.backoff_ns(), 0);
}

#[test]
fn a_burst_drained_in_a_few_polls_pays_off() {
    let p = params();
    let (mut pol, now) = polling();
    // Two polls take what eight interrupts of four would have: too few polls to count as kept
    // up, but clearly fewer interrupts.
    let a = pol.on_timer(now + WAIT, 0, timed(10, LATENCY + WAIT / 2), 22, &p);
    assert!(matches!(a, Action::Rearm { .. }), "{a:?}");
    let a = pol.on_timer(now + 2 * WAIT, 0, timed(22, LATENCY + WAIT / 2), 0, &p);
    assert!(matches!(a, Action::Rearm { .. }), "{a:?}");
    let a = pol.on_timer(now + 3 * WAIT, 0, Reaped::default(), 0, &p);
    assert_eq!(
        a,
        Action::StopPolling {
            ending: Ending::Idle
        }
    );
    assert_eq!(pol.stage(), Stage::Sample);
    assert_eq!((pol.backoff_ns(), pol.failures()), (0, 0));
}

#[test]
fn an_empty_episode_backs_off_even_when_interrupts_reap_next_to_nothing() {
    // Twenty empty interrupts for each one that reaps a completion (a shared or noisy line):
    // an interrupt reaps next to nothing on average, so any reap would look like a saving.
    let p = params();
    let mut pol = Policy::new();
    let mut now = 1_000 * US;
    let action = loop {
        for _ in 0..20 {
            now += US / 4;
            pol.on_irq(now, Reaped::default(), 32, &p);
        }
        now += US / 4;
        let a = pol.on_irq(now, timed(1, LATENCY), 32, &p);
        if a != Action::Stay || now > 1_000_000 * US {
            break a;
        }
    };
    assert!(matches!(action, Action::StartPolling { .. }), "{action:?}");
    assert_eq!(pol.estimates().per_irq_x16, 0);
    let a = pol.on_timer(now + pol.wait_ns(), 0, Reaped::default(), 0, &p);
    assert_eq!(
        a,
        Action::StopPolling {
            ending: Ending::Idle
        }
    );
    assert_eq!(pol.stage(), Stage::Backoff);
}

#[test]
fn idle_right_after_starting_backs_off() {
    let p = params();
    let (mut pol, now) = polling();
    let a = pol.on_timer(now + WAIT, 0, Reaped::default(), 0, &p);
    assert_eq!(
        a,
        Action::StopPolling {
            ending: Ending::Idle
        }
    );
    assert_eq!(pol.stage(), Stage::Backoff);
    assert_eq!(pol.backoff_ns(), p.backoff_ns);
}

#[test]
fn an_idle_queue_forgets_its_failed_episodes() {
    let p = params();
    let (mut pol, now) = polling();
    let (_, t) = starve(&mut pol, now, 30);
    assert_eq!(pol.stage(), Stage::Backoff);
    assert_eq!(pol.failures(), 1);
    // Silent for longer than the idle gap (the 1 ms floor), then a new load: no backoff left,
    // no failure counted.
    let until = t + pol.backoff_ns();
    let t = t + 1_001 * US;
    assert!(t < until);
    assert_eq!(pol.on_irq(t, timed(4, LATENCY), 32, &p), Action::Stay);
    assert_eq!(pol.stage(), Stage::Sample);
    assert_eq!(pol.failures(), 0);
    let (action, _) = sample(&mut pol, t + EVERY, EVERY, timed(4, LATENCY), 32);
    assert!(matches!(action, Action::StartPolling { .. }), "{action:?}");
}

#[test]
fn a_backoff_after_a_long_episode_is_not_idle() {
    let (mut pol, now) = polling();
    // Polls for longer than the idle gap (adding the latency the wait aims at, so that it
    // stays): no interrupt meanwhile, yet the queue was busy.
    let p = params();
    let aimed = LATENCY * u64::from(p.budget_percent) / 100 * 85 / 100;
    let mut now = now;
    for _ in 0..200 {
        now += pol.wait_ns();
        let a = pol.on_timer(now, 0, timed(10, LATENCY + aimed), 22, &p);
        assert_eq!(a, Action::Rearm { wait_ns: WAIT });
    }
    let (_, t) = starve(&mut pol, now, 30);
    assert_eq!(pol.stage(), Stage::Backoff);
    // The interrupts that come during the backoff do not end it.
    busy_backoff(&mut pol, t);
}

#[test]
fn episode_is_capped_and_resamples_without_backoff() {
    let mut p = params();
    p.episode_polls = 16;
    let (mut pol, now) = polling();
    let now = keep_up(&mut pol, now, 15);
    let a = pol.on_timer(now + WAIT, 0, timed(10, LATENCY + WAIT / 2), 22, &p);
    assert_eq!(
        a,
        Action::StopPolling {
            ending: Ending::Capped
        }
    );
    assert_eq!(pol.stage(), Stage::Sample);
    assert_eq!(pol.backoff_ns(), 0);
}

#[test]
fn switching_adaptive_off_ends_polling_at_the_next_poll() {
    let mut p = params();
    let (mut pol, now) = polling();
    p.enabled = false;
    let a = pol.on_timer(now + WAIT, 0, timed(10, LATENCY), 22, &p);
    assert_eq!(
        a,
        Action::StopPolling {
            ending: Ending::Disabled
        }
    );
    assert_eq!(pol.stage(), Stage::Sample);
    assert_eq!(
        pol.on_irq(now + 20 * US, timed(8, LATENCY), 24, &p),
        Action::Stay
    );
}

#[test]
fn interrupt_while_polling_changes_nothing() {
    let p = params();
    let (mut pol, now) = polling();
    assert_eq!(
        pol.on_irq(now + US, timed(4, LATENCY), 32, &p),
        Action::Stay
    );
    assert_eq!(pol.stage(), Stage::Poll);
    let a = pol.on_timer(now + WAIT, 0, timed(10, LATENCY + WAIT / 2), 22, &p);
    assert!(matches!(a, Action::Rearm { .. }));
}

#[test]
fn timer_outside_polling_never_leaves_the_vector_masked() {
    let p = params();
    let mut pol = Policy::new();
    assert_eq!(
        pol.on_timer(10, 0, Reaped::default(), 0, &p),
        Action::StopPolling {
            ending: Ending::Disabled
        }
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
    // 4 completions every 250 ns after 2 us each: a 62.5 ns gap, a budget of 500 ns; the
    // batch of 8 would take 500 ns, raised to 1 us.
    let (action, _) = sample(&mut pol, 0, 250, timed(4, 2 * US), 256);
    assert_eq!(
        action,
        Action::StartPolling {
            wait_ns: MIN_WAIT_NS
        }
    );
}

#[test]
fn param_specs_are_consistent() {
    for spec in PARAM_SPECS {
        assert!(
            spec.min <= spec.default && spec.default <= spec.max,
            "{}",
            spec.name
        );
        assert!(spec.accepts(spec.default));
        assert!(!spec.accepts(spec.max.wrapping_add(1)) || spec.max == u32::MAX);
        assert!(spec.min == 0 || !spec.accepts(spec.min - 1));
    }
    let d = crate::defaults();
    assert!(d.enabled);
    assert_eq!(
        d.max_delay_ns,
        u64::from(PARAM_SPECS[param::MAX_DELAY_US].default) * 1000
    );
    assert!(d.backoff_ns <= d.backoff_max_ns);
    assert!(u64::from(PARAM_SPECS[param::MAX_DELAY_US].min) * 1000 >= MIN_WAIT_NS);
}
