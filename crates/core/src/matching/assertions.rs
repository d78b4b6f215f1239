//! MPI-4 assertions a communicator's info may make about the traffic on it.

/// What a communicator asserts (`mpi_assert_*` info keys); all false unless set to "true".
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Assertions {
    /// No receive or probe uses `MPI_ANY_SOURCE`.
    pub no_any_source: bool,
    /// No receive or probe uses `MPI_ANY_TAG`.
    pub no_any_tag: bool,
    /// The program does not rely on non-overtaking order.
    pub allow_overtaking: bool,
}

impl Assertions {
    pub const KEYS: [&'static str; 3] = [
        "mpi_assert_no_any_source",
        "mpi_assert_no_any_tag",
        "mpi_assert_allow_overtaking",
    ];

    /// Reads the assertions through `value`, which gives the info value set for a key.
    pub fn from_info(value: impl Fn(&str) -> Option<String>) -> Assertions {
        Assertions::default().updated(value)
    }

    /// The assertions once `MPI_Comm_set_info` gave the keys `value` has: each of those takes
    /// its new value, the others keep theirs (MPI-4 leaves the hints a call does not name).
    pub fn updated(self, value: impl Fn(&str) -> Option<String>) -> Assertions {
        let set = |key: &str, now: bool| {
            value(key).map_or(now, |v| v.trim().eq_ignore_ascii_case("true"))
        };
        Assertions {
            no_any_source: set(Self::KEYS[0], self.no_any_source),
            no_any_tag: set(Self::KEYS[1], self.no_any_tag),
            allow_overtaking: set(Self::KEYS[2], self.allow_overtaking),
        }
    }

    /// The keys asserted, as MPI names them.
    pub fn keys(self) -> Vec<String> {
        let set = [self.no_any_source, self.no_any_tag, self.allow_overtaking];
        Self::KEYS
            .iter()
            .zip(set)
            .filter(|&(_, on)| on)
            .map(|(key, _)| key.to_string())
            .collect()
    }

    /// Every point-to-point receive names its source and its tag.
    pub fn no_wildcards(self) -> bool {
        self.no_any_source && self.no_any_tag
    }

    /// Unordered matching is allowed and needs no wildcards: the hash tables of Klenk et al. 2017, §VI.
    pub fn unordered(self) -> bool {
        self.no_any_source && self.no_any_tag && self.allow_overtaking
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_true_asserts() {
        let info = |key: &str| match key {
            "mpi_assert_no_any_source" => Some("TRUE".to_string()),
            "mpi_assert_no_any_tag" => Some("false".to_string()),
            "mpi_assert_allow_overtaking" => Some("true".to_string()),
            _ => None,
        };
        let a = Assertions::from_info(info);
        assert!(a.no_any_source && !a.no_any_tag && a.allow_overtaking);
        assert!(!a.unordered());
        assert_eq!(
            a.keys(),
            ["mpi_assert_no_any_source", "mpi_assert_allow_overtaking"]
        );
        assert_eq!(Assertions::from_info(|_| None), Assertions::default());
    }

    #[test]
    fn an_update_changes_only_the_keys_it_names() {
        let before = Assertions {
            no_any_source: true,
            no_any_tag: false,
            allow_overtaking: true,
        };
        let after = before.updated(|key| match key {
            "mpi_assert_no_any_tag" => Some("true".to_string()),
            "mpi_assert_allow_overtaking" => Some("false".to_string()),
            _ => None,
        });
        assert!(after.no_any_source, "kept: the update does not name it");
        assert!(after.no_any_tag && !after.allow_overtaking);
        assert_eq!(before.updated(|_| None), before);
    }
}
