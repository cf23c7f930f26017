//! One timer table per state machine (the quinn-proto `TimerTable` pattern).
//!
//! Parts: [`Timer`] names each timer the detector uses; [`TimerTable`] holds at most one
//! deadline per timer and answers "what is the earliest deadline" for `poll_timeout`.

use crate::time::Time;

/// The detector's timers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Timer {
    /// Next heartbeat to the ring successor is due (period η).
    Heartbeat = 0,
    /// The observed predecessor is declared failed if nothing arrives before this (timeout δ).
    Observe = 1,
}

impl Timer {
    const COUNT: usize = 2;
    const VALUES: [Timer; Timer::COUNT] = [Timer::Heartbeat, Timer::Observe];
}

/// At most one deadline per [`Timer`].
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct TimerTable {
    deadlines: [Option<Time>; Timer::COUNT],
}

impl TimerTable {
    /// Arms (or re-arms) `timer` for `at`.
    pub(crate) fn set(&mut self, timer: Timer, at: Time) {
        self.deadlines[timer as usize] = Some(at);
    }

    /// Disarms `timer`.
    pub(crate) fn stop(&mut self, timer: Timer) {
        self.deadlines[timer as usize] = None;
    }

    /// Disarms every timer.
    pub(crate) fn stop_all(&mut self) {
        self.deadlines = [None; Timer::COUNT];
    }

    /// The deadline of `timer`, if armed.
    pub(crate) fn get(&self, timer: Timer) -> Option<Time> {
        self.deadlines[timer as usize]
    }

    /// Whether `timer` is armed and due at `now`.
    pub(crate) fn is_expired(&self, timer: Timer, now: Time) -> bool {
        self.get(timer).is_some_and(|t| t <= now)
    }

    /// The earliest armed deadline.
    pub(crate) fn next_timeout(&self) -> Option<Time> {
        Timer::VALUES.iter().filter_map(|&t| self.get(t)).min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn earliest_deadline_wins() {
        let mut t = TimerTable::default();
        assert_eq!(t.next_timeout(), None);
        t.set(Timer::Observe, Time::from_nanos(10));
        t.set(Timer::Heartbeat, Time::from_nanos(4));
        assert_eq!(t.next_timeout(), Some(Time::from_nanos(4)));
        assert!(t.is_expired(Timer::Heartbeat, Time::from_nanos(4)));
        assert!(!t.is_expired(Timer::Observe, Time::from_nanos(4)));
        t.stop(Timer::Heartbeat);
        assert_eq!(t.next_timeout(), Some(Time::from_nanos(10)));
        t.stop_all();
        assert_eq!(t.next_timeout(), None);
    }
}
