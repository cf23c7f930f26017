//! Opaque points in time passed into the state machines.
//!
//! The crate never reads a clock. The engine maps its own monotonic clock onto [`Time`]
//! (e.g. nanoseconds since the job started) and the simulator uses a virtual clock.
//! Arithmetic saturates instead of panicking: a [`Time`] is a `u64` count of nanoseconds.

use std::fmt;
use std::ops::{Add, AddAssign, Sub};
use std::time::Duration;

/// A point in time, in nanoseconds from an origin chosen by the caller.
///
/// Like [`std::time::Instant`], but passed in rather than read, so a whole cluster can run
/// on one virtual clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Time(u64);

fn duration_to_nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

impl Time {
    /// The origin.
    pub const ZERO: Time = Time(0);

    /// The point `nanos` nanoseconds after the origin.
    pub const fn from_nanos(nanos: u64) -> Time {
        Time(nanos)
    }

    /// Nanoseconds since the origin.
    pub const fn as_nanos(self) -> u64 {
        self.0
    }

    /// The point `d` after the origin (saturating).
    pub fn from_duration(d: Duration) -> Time {
        Time(duration_to_nanos(d))
    }

    /// Time elapsed since the origin.
    pub const fn since_origin(self) -> Duration {
        Duration::from_nanos(self.0)
    }

    /// `self - earlier`, or zero if `earlier` is later.
    pub const fn saturating_duration_since(self, earlier: Time) -> Duration {
        Duration::from_nanos(self.0.saturating_sub(earlier.0))
    }

    /// `self - earlier`, or `None` if `earlier` is later.
    pub fn checked_duration_since(self, earlier: Time) -> Option<Duration> {
        self.0.checked_sub(earlier.0).map(Duration::from_nanos)
    }
}

impl Add<Duration> for Time {
    type Output = Time;
    /// Saturates at the largest representable time.
    fn add(self, d: Duration) -> Time {
        Time(self.0.saturating_add(duration_to_nanos(d)))
    }
}

impl AddAssign<Duration> for Time {
    fn add_assign(&mut self, d: Duration) {
        *self = *self + d;
    }
}

impl Sub<Time> for Time {
    type Output = Duration;
    /// Saturates at zero, like [`Time::saturating_duration_since`].
    fn sub(self, earlier: Time) -> Duration {
        self.saturating_duration_since(earlier)
    }
}

impl Sub<Duration> for Time {
    type Output = Time;
    /// Saturates at [`Time::ZERO`].
    fn sub(self, d: Duration) -> Time {
        Time(self.0.saturating_sub(duration_to_nanos(d)))
    }
}

impl fmt::Display for Time {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:.6}ms", self.0 as f64 / 1e6)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arithmetic_saturates() {
        let t = Time::from_nanos(5);
        assert_eq!(t + Duration::from_nanos(3), Time::from_nanos(8));
        assert_eq!(Time::from_nanos(8) - t, Duration::from_nanos(3));
        assert_eq!(t - Time::from_nanos(8), Duration::ZERO);
        assert_eq!(t - Duration::from_nanos(3), Time::from_nanos(2));
        assert_eq!(t - Duration::from_nanos(9), Time::ZERO);
        assert_eq!(t.checked_duration_since(Time::from_nanos(8)), None);
        assert_eq!(Time::from_nanos(u64::MAX - 1) + Duration::MAX, Time::from_nanos(u64::MAX));
        assert_eq!(Time::from_duration(Duration::from_millis(2)).as_nanos(), 2_000_000);
        assert_eq!(Time::from_nanos(1_500_000).to_string(), "1.500000ms");
    }
}
