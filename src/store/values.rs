//! The fixed words stored with a run and its conversation, as types: a run's status and a
//! conversation's visibility. They are stored and sent as their lower-case names.

use std::fmt;

use serde::{Deserialize, Serialize};

/// Where a run is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RunStatus {
    Running,
    Completed,
    Failed,
    Cancelled,
    /// The server stopped mid-run and the run could not be resumed.
    Interrupted,
}

impl RunStatus {
    pub const ALL: [RunStatus; 5] = [
        RunStatus::Running,
        RunStatus::Completed,
        RunStatus::Failed,
        RunStatus::Cancelled,
        RunStatus::Interrupted,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Running => "running",
            RunStatus::Completed => "completed",
            RunStatus::Failed => "failed",
            RunStatus::Cancelled => "cancelled",
            RunStatus::Interrupted => "interrupted",
        }
    }

    pub fn parse(s: &str) -> Option<RunStatus> {
        RunStatus::ALL.into_iter().find(|v| v.as_str() == s)
    }

    /// Whether the run has ended, one way or another.
    pub fn is_over(self) -> bool {
        self != RunStatus::Running
    }

    /// Read from a stored row: a word this server does not know (written by a newer one) reads
    /// as `interrupted`, a run this server will not touch.
    pub fn stored(s: &str) -> RunStatus {
        RunStatus::parse(s).unwrap_or_else(|| {
            log::warn!("unknown run status {s:?} in the database; treated as interrupted");
            RunStatus::Interrupted
        })
    }
}

impl fmt::Display for RunStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where an eval is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EvalStatus {
    Running,
    Completed,
    /// Stopped early (Ctrl-C, the budget): it can be resumed.
    Stopped,
}

impl EvalStatus {
    pub const ALL: [EvalStatus; 3] =
        [EvalStatus::Running, EvalStatus::Completed, EvalStatus::Stopped];

    pub fn as_str(self) -> &'static str {
        match self {
            EvalStatus::Running => "running",
            EvalStatus::Completed => "completed",
            EvalStatus::Stopped => "stopped",
        }
    }

    pub fn parse(s: &str) -> Option<EvalStatus> {
        EvalStatus::ALL.into_iter().find(|v| v.as_str() == s)
    }
}

/// Read from a stored row: a word this server does not know (written by a newer one, or an
/// eval whose process died while `running` reads as written) reads as `stopped`, which can be
/// resumed.
impl From<String> for EvalStatus {
    fn from(s: String) -> EvalStatus {
        EvalStatus::parse(&s).unwrap_or_else(|| {
            log::warn!("unknown eval status {s:?} in the database; treated as stopped");
            EvalStatus::Stopped
        })
    }
}

impl fmt::Display for EvalStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Who may see a conversation and its runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Visibility {
    /// Every signed-in user (the default).
    #[default]
    Team,
    /// Its owner and admins.
    Private,
}

impl Visibility {
    pub fn as_str(self) -> &'static str {
        match self {
            Visibility::Team => "team",
            Visibility::Private => "private",
        }
    }

    pub fn parse(s: &str) -> Option<Visibility> {
        [Visibility::Team, Visibility::Private].into_iter().find(|v| v.as_str() == s)
    }

    /// Read from a stored row: anything but `team` is private (the safe side).
    pub fn stored(s: &str) -> Visibility {
        Visibility::parse(s).unwrap_or(Visibility::Private)
    }
}

impl fmt::Display for Visibility {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_and_visibilities_read_back_as_they_are_written() {
        for s in RunStatus::ALL {
            assert_eq!(RunStatus::parse(s.as_str()), Some(s));
            assert_eq!(serde_json::to_value(s).unwrap(), s.as_str());
        }
        assert_eq!(RunStatus::stored("paused"), RunStatus::Interrupted);
        for s in EvalStatus::ALL {
            assert_eq!(EvalStatus::from(s.as_str().to_string()), s);
            assert_eq!(serde_json::to_value(s).unwrap(), s.as_str());
        }
        assert_eq!(EvalStatus::from("paused".to_string()), EvalStatus::Stopped);
        assert_eq!(Visibility::stored("team"), Visibility::Team);
        assert_eq!(Visibility::stored("shared"), Visibility::Private, "unknown is the safe side");
        assert_eq!(serde_json::to_value(Visibility::Private).unwrap(), "private");
    }
}
