//! Process groups (R9, run-through chapter §17.8.1): ordered sets of processes, named by their
//! world ranks. Failed processes stay members: `size` counts them, and union,
//! intersection and difference keep them like any other member. Freeing a group is
//! dropping it, which always completes.

use runthrough_engine::Rank;

/// The result of [`Group::compare`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupOrder {
    /// Same members in the same order (MPI_IDENT).
    Ident,
    /// Same members, another order (MPI_SIMILAR).
    Similar,
    /// Different members (MPI_UNEQUAL).
    Unequal,
}

/// An ordered group of processes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Group {
    members: Vec<Rank>,
    me: Rank,
}

impl Group {
    pub(crate) fn new(members: Vec<Rank>, me: Rank) -> Self {
        Group { members, me }
    }

    /// Number of members, failed ones included.
    pub fn size(&self) -> usize {
        self.members.len()
    }

    /// The calling process's rank in the group, if it is a member.
    pub fn rank(&self) -> Option<usize> {
        self.members.iter().position(|r| *r == self.me)
    }

    /// The members' world ranks, in group order.
    pub fn world_ranks(&self) -> Vec<usize> {
        self.members.iter().map(|r| r.0 as usize).collect()
    }

    /// Members of `self`, then members of `other` not in `self` (MPI_Group_union).
    pub fn union(&self, other: &Group) -> Group {
        let mut m = self.members.clone();
        m.extend(other.members.iter().filter(|r| !self.members.contains(r)));
        Group::new(m, self.me)
    }

    /// Members of `self` that are also in `other`, in `self`'s order.
    pub fn intersection(&self, other: &Group) -> Group {
        Group::new(self.members.iter().copied().filter(|r| other.members.contains(r)).collect(), self.me)
    }

    /// Members of `self` not in `other`, in `self`'s order.
    pub fn difference(&self, other: &Group) -> Group {
        Group::new(self.members.iter().copied().filter(|r| !other.members.contains(r)).collect(), self.me)
    }

    /// For each rank of `self` in `ranks`, its rank in `other` (`None` if not a member
    /// there or out of range) (MPI_Group_translate_ranks).
    pub fn translate_ranks(&self, ranks: &[usize], other: &Group) -> Vec<Option<usize>> {
        ranks.iter().map(|&r| self.members.get(r).and_then(|w| other.members.iter().position(|o| o == w))).collect()
    }

    /// The members at `ranks` of this group, in that order (MPI_Group_incl).
    ///
    /// # Errors
    /// `InvalidRank` for a rank out of range, `InvalidArg` for a repeated one.
    pub fn incl(&self, ranks: &[usize]) -> Result<Group, crate::Error> {
        let mut m = Vec::with_capacity(ranks.len());
        for &r in ranks {
            let w = *self
                .members
                .get(r)
                .ok_or(crate::Error::InvalidRank { rank: r as i64, size: self.members.len() as u32 })?;
            if m.contains(&w) {
                return Err(crate::Error::InvalidArg("a rank appears twice in a group inclusion"));
            }
            m.push(w);
        }
        Ok(Group::new(m, self.me))
    }

    /// The members, as world ranks.
    pub(crate) fn ranks(&self) -> &[Rank] {
        &self.members
    }

    /// Compares membership and order.
    pub fn compare(&self, other: &Group) -> GroupOrder {
        if self.members == other.members {
            GroupOrder::Ident
        } else if self.members.len() == other.members.len() && self.members.iter().all(|r| other.members.contains(r)) {
            GroupOrder::Similar
        } else {
            GroupOrder::Unequal
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn g(m: &[u32]) -> Group {
        Group::new(m.iter().map(|&r| Rank(r)).collect(), Rank(2))
    }

    #[test]
    fn r9_group_operations_keep_failed_members() {
        let all = g(&[0, 1, 2, 3, 4]);
        let failed = g(&[3, 1]);
        assert_eq!(all.size(), 5, "size counts failed members");
        assert_eq!(all.difference(&failed).world_ranks(), vec![0, 2, 4]);
        assert_eq!(all.intersection(&failed).world_ranks(), vec![1, 3]);
        assert_eq!(failed.union(&all).world_ranks(), vec![3, 1, 0, 2, 4]);
        assert_eq!(all.translate_ranks(&[1, 3, 4, 9], &failed), vec![Some(1), Some(0), None, None]);
        assert_eq!(all.compare(&all.clone()), GroupOrder::Ident);
        assert_eq!(failed.compare(&g(&[1, 3])), GroupOrder::Similar);
        assert_eq!(failed.compare(&all), GroupOrder::Unequal);
        assert_eq!(all.rank(), Some(2));
        assert_eq!(failed.rank(), None);
        drop(failed); // freeing always completes
    }

    #[test]
    fn incl_picks_members_in_order_and_rejects_bad_ranks() {
        let all = g(&[4, 3, 2, 1, 0]);
        assert_eq!(all.incl(&[4, 0, 2]).unwrap().world_ranks(), vec![0, 4, 2]);
        assert_eq!(all.incl(&[5]), Err(crate::Error::InvalidRank { rank: 5, size: 5 }));
        assert!(all.incl(&[1, 1]).is_err());
        assert_eq!(all.incl(&[]).unwrap().size(), 0);
    }
}
