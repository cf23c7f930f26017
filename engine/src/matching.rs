//! Message matching: posted receives and unexpected (buffered) messages.
//!
//! Both queues are kept in arrival/post order and searched front to back, so
//! - an arriving message matches the *earliest posted* receive whose pattern fits, and
//! - a newly posted receive takes the *earliest arrived* unexpected message that fits.
//!
//! Together with in-order delivery per (sender, receiver) (the engine restores send
//! order from sequence numbers before matching), this gives MPI's non-overtaking rule.
//! Patterns match on (context, source, tag) with `None` as the wildcard
//! (ANY_SOURCE / ANY_TAG). Sans-IO: no transport, no buffers, just the order.

use std::collections::VecDeque;

use crate::types::{ContextId, Tag};

/// What a receive accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pattern {
    /// Communication context (never a wildcard).
    pub ctx: ContextId,
    /// Source rank in the communicator, `None` for ANY_SOURCE.
    pub src: Option<u32>,
    /// Tag, `None` for ANY_TAG.
    pub tag: Option<Tag>,
}

/// The matching-relevant part of an arrived message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Arrival {
    /// Communication context.
    pub ctx: ContextId,
    /// Source rank in the communicator.
    pub src: u32,
    /// Tag.
    pub tag: Tag,
}

impl Pattern {
    /// Whether a message with envelope `a` satisfies this pattern.
    #[inline]
    pub fn matches(&self, a: &Arrival) -> bool {
        self.ctx == a.ctx && self.src.is_none_or(|s| s == a.src) && self.tag.is_none_or(|t| t == a.tag)
    }
}

/// Receives posted and not yet matched, in post order.
#[derive(Debug)]
pub struct PostedQueue<T> {
    entries: VecDeque<(Pattern, T)>,
}

impl<T> Default for PostedQueue<T> {
    fn default() -> Self {
        Self { entries: VecDeque::new() }
    }
}

impl<T> PostedQueue<T> {
    /// Appends a posted receive.
    #[inline]
    pub fn post(&mut self, pattern: Pattern, item: T) {
        self.entries.push_back((pattern, item));
    }

    /// Removes and returns the earliest posted receive that `a` matches.
    #[inline]
    pub fn take_match(&mut self, a: &Arrival) -> Option<(Pattern, T)> {
        // The common case: the earliest posted receive is the one (in-order traffic).
        if self.entries.front()?.0.matches(a) {
            return self.entries.pop_front();
        }
        let i = self.entries.iter().position(|(p, _)| p.matches(a))?;
        self.entries.remove(i)
    }

    /// Removes and returns the first entry for which `pred` holds (cancel, failure).
    pub fn remove_where(&mut self, mut pred: impl FnMut(&Pattern, &T) -> bool) -> Option<(Pattern, T)> {
        let i = self.entries.iter().position(|(p, t)| pred(p, t))?;
        self.entries.remove(i)
    }

    /// Number of posted receives.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether nothing is posted.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// Messages that arrived before a matching receive was posted, in arrival order.
#[derive(Debug)]
pub struct UnexpectedQueue<U> {
    entries: VecDeque<(Arrival, U)>,
}

impl<U> Default for UnexpectedQueue<U> {
    fn default() -> Self {
        Self { entries: VecDeque::new() }
    }
}

impl<U> UnexpectedQueue<U> {
    /// Appends an arrived message.
    pub fn push(&mut self, a: Arrival, item: U) {
        self.entries.push_back((a, item));
    }

    /// Removes and returns the earliest arrived message `p` matches.
    #[inline]
    pub fn take_match(&mut self, p: &Pattern) -> Option<(Arrival, U)> {
        if self.entries.is_empty() {
            return None;
        }
        let i = self.entries.iter().position(|(a, _)| p.matches(a))?;
        self.entries.remove(i)
    }

    /// Removes and returns the earliest arrived message `p` matches among those `keep`
    /// accepts (R12: a wildcard skips sources whose receives must fail).
    pub fn take_match_where(
        &mut self,
        p: &Pattern,
        mut keep: impl FnMut(&Arrival, &U) -> bool,
    ) -> Option<(Arrival, U)> {
        if self.entries.is_empty() {
            return None;
        }
        let i = self.entries.iter().position(|(a, u)| p.matches(a) && keep(a, u))?;
        self.entries.remove(i)
    }

    /// Removes and returns the earliest arrived message `p` matches among those `keep`
    /// accepts, if `take` accepts it; otherwise leaves the queue as it was (a receive
    /// must not skip the earliest match for a later one).
    pub fn take_first_match_if(
        &mut self,
        p: &Pattern,
        mut keep: impl FnMut(&Arrival) -> bool,
        take: impl FnOnce(&U) -> bool,
    ) -> Option<(Arrival, U)> {
        let i = self.entries.iter().position(|(a, _)| p.matches(a) && keep(a))?;
        if take(&self.entries[i].1) {
            self.entries.remove(i)
        } else {
            None
        }
    }

    /// Removes and returns the earliest arrived message `pred` accepts, whatever its
    /// envelope (a sender withdrawing one message: MPI_Cancel of a send).
    pub fn remove_where(&mut self, mut pred: impl FnMut(&Arrival, &U) -> bool) -> Option<(Arrival, U)> {
        let i = self.entries.iter().position(|(a, u)| pred(a, u))?;
        self.entries.remove(i)
    }

    /// The earliest arrived message `p` matches, left in place (probe).
    pub fn peek_match(&self, p: &Pattern) -> Option<&(Arrival, U)> {
        self.entries.iter().find(|(a, _)| p.matches(a))
    }

    /// Number of buffered messages.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether nothing is buffered.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const C: ContextId = ContextId(4);

    fn pat(src: Option<u32>, tag: Option<i32>) -> Pattern {
        Pattern { ctx: C, src, tag: tag.map(Tag) }
    }

    fn arr(src: u32, tag: i32) -> Arrival {
        Arrival { ctx: C, src, tag: Tag(tag) }
    }

    #[test]
    fn wildcards_match_and_contexts_separate() {
        let a = arr(2, 7);
        assert!(pat(None, None).matches(&a));
        assert!(pat(Some(2), None).matches(&a));
        assert!(pat(None, Some(7)).matches(&a));
        assert!(!pat(Some(1), None).matches(&a));
        assert!(!pat(None, Some(8)).matches(&a));
        let other_ctx = Pattern { ctx: ContextId(5), src: None, tag: None };
        assert!(!other_ctx.matches(&a));
    }

    #[test]
    fn earliest_posted_receive_wins() {
        let mut q = PostedQueue::default();
        q.post(pat(Some(1), Some(3)), "specific-other");
        q.post(pat(None, Some(7)), "any-source");
        q.post(pat(Some(2), None), "any-tag");
        assert_eq!(q.take_match(&arr(2, 7)).map(|e| e.1), Some("any-source"));
        assert_eq!(q.take_match(&arr(2, 7)).map(|e| e.1), Some("any-tag"));
        assert_eq!(q.take_match(&arr(2, 7)), None);
        assert_eq!(q.len(), 1);
    }

    #[test]
    fn earliest_unexpected_message_wins_and_probe_leaves_it() {
        let mut q = UnexpectedQueue::default();
        q.push(arr(1, 5), 10);
        q.push(arr(2, 5), 20);
        q.push(arr(1, 6), 30);
        assert_eq!(q.peek_match(&pat(Some(1), None)).map(|e| e.1), Some(10));
        assert_eq!(q.take_match(&pat(None, Some(6))).map(|e| e.1), Some(30));
        assert_eq!(q.take_match(&pat(None, None)).map(|e| e.1), Some(10));
        assert_eq!(q.take_match(&pat(Some(2), Some(5))).map(|e| e.1), Some(20));
        assert!(q.is_empty());
    }

    /// One step of a random schedule: a message arrives or a receive is posted.
    #[derive(Debug, Clone)]
    enum Step {
        Arrive { src: u32, tag: i32 },
        Post { src: Option<u32>, tag: Option<i32> },
    }

    fn step() -> impl Strategy<Value = Step> {
        prop_oneof![
            (0u32..3, 0i32..3).prop_map(|(src, tag)| Step::Arrive { src, tag }),
            (proptest::option::of(0u32..3), proptest::option::of(0i32..3))
                .prop_map(|(src, tag)| Step::Post { src, tag }),
        ]
    }

    proptest! {
        /// Any interleaving of arrivals (in send order per source) and posts gives
        /// non-overtaking delivery: every match pairs the earliest posted receive with
        /// the earliest pending message that fits, checked against a brute-force oracle,
        /// and per source, messages matching a common pattern are delivered in send order.
        #[test]
        fn any_interleaving_is_non_overtaking(steps in proptest::collection::vec(step(), 0..120)) {
            let mut posted: PostedQueue<(u64, Pattern)> = PostedQueue::default();
            let mut unexpected: UnexpectedQueue<(u64, u32)> = UnexpectedQueue::default();
            // Oracle state: pending posts and messages in order.
            let mut o_posts: Vec<(u64, Pattern)> = Vec::new();
            let mut o_msgs: Vec<(u64, Arrival, u32)> = Vec::new();
            let mut per_src_sent = [0u32; 3];
            let mut delivered: Vec<(Pattern, u32, u32)> = Vec::new(); // (pattern, src, n)
            for (i, s) in steps.into_iter().enumerate() {
                let i = i as u64;
                match s {
                    Step::Arrive { src, tag } => {
                        let a = arr(src, tag);
                        let n = per_src_sent[src as usize];
                        per_src_sent[src as usize] += 1;
                        let expect = o_posts.iter().position(|(_, p)| p.matches(&a));
                        match posted.take_match(&a) {
                            Some((p, (id, _))) => {
                                let j = expect.expect("oracle agrees a post matches");
                                prop_assert_eq!(o_posts.remove(j).0, id);
                                delivered.push((p, src, n));
                            }
                            None => {
                                prop_assert!(expect.is_none());
                                unexpected.push(a, (i, n));
                                o_msgs.push((i, a, n));
                            }
                        }
                    }
                    Step::Post { src, tag } => {
                        let p = pat(src, tag);
                        let expect = o_msgs.iter().position(|(_, a, _)| p.matches(a));
                        match unexpected.take_match(&p) {
                            Some((a, (id, n))) => {
                                let j = expect.expect("oracle agrees a message matches");
                                prop_assert_eq!(o_msgs.remove(j).0, id);
                                delivered.push((p, a.src, n));
                            }
                            None => {
                                prop_assert!(expect.is_none());
                                posted.post(p, (i, p));
                                o_posts.push((i, p));
                            }
                        }
                    }
                }
            }
            // Non-overtaking: for fully wildcarded-by-tag receives from one source, the
            // sequence numbers delivered from that source only grow.
            for src in 0..3u32 {
                let ns: Vec<u32> = delivered
                    .iter()
                    .filter(|(p, s, _)| *s == src && p.tag.is_none())
                    .map(|d| d.2)
                    .collect();
                prop_assert!(ns.windows(2).all(|w| w[0] < w[1]), "src {} got {:?}", src, ns);
            }
        }
    }
}
