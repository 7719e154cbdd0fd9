//! Who is asking, and what they may see and do. Every engine entry point that reads or
//! controls a run takes a [`Viewer`]; the web layer builds it from the caller's token and the
//! CLI uses [`Viewer::local`].
//!
//! The rules: a run is visible to its owner, to admins, and — when its conversation's
//! visibility is `team` — to every signed-in user. Only its owner or an admin may cancel it or
//! add a follow-up. A run someone may not see is reported as not found, so its existence does
//! not leak.

use crate::store::{Access, Visibility};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Viewer {
    /// The user's name; none for the local CLI, which acts as an administrator.
    pub name: Option<String>,
    pub is_admin: bool,
}

impl Viewer {
    pub fn user(name: &str, is_admin: bool) -> Self {
        Viewer { name: Some(name.to_string()), is_admin }
    }

    /// The terminal client running in-process: it owns the database it opened.
    pub fn local() -> Self {
        Viewer { name: None, is_admin: true }
    }

    pub fn can_see(&self, owner: Option<&str>, visibility: Visibility) -> bool {
        self.is_admin || visibility == Visibility::Team || self.owns(owner)
    }

    pub fn can_see_access(&self, access: &Access) -> bool {
        self.can_see(access.owner.as_deref(), access.visibility)
    }

    /// May cancel the run, review it, or ask a follow-up in its conversation.
    pub fn can_control(&self, owner: Option<&str>) -> bool {
        self.is_admin || self.owns(owner)
    }

    fn owns(&self, owner: Option<&str>) -> bool {
        owner.is_some() && owner == self.name.as_deref()
    }

    /// For list queries: `None` sees everything, `Some(name)` sees team runs and their own.
    pub fn visible_to(&self) -> Option<&str> {
        if self.is_admin {
            None
        } else {
            Some(self.name.as_deref().unwrap_or(""))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_pair_of_roles() {
        let admin = Viewer::user("root", true);
        let alice = Viewer::user("alice", false);
        let bob = Viewer::user("bob", false);
        // alice's private run: alice and admins see it, bob does not.
        assert!(alice.can_see(Some("alice"), Visibility::Private));
        assert!(admin.can_see(Some("alice"), Visibility::Private));
        assert!(!bob.can_see(Some("alice"), Visibility::Private));
        // alice's team run: everyone sees it, only alice and admins control it.
        assert!(bob.can_see(Some("alice"), Visibility::Team));
        assert!(alice.can_control(Some("alice")));
        assert!(admin.can_control(Some("alice")));
        assert!(!bob.can_control(Some("alice")));
        // A run from before accounts (no owner): visible per its visibility, admins control it.
        assert!(bob.can_see(None, Visibility::Team));
        assert!(!bob.can_control(None));
        assert!(admin.can_control(None));
        assert!(Viewer::local().can_control(Some("alice")));
        assert_eq!(bob.visible_to(), Some("bob"));
        assert_eq!(admin.visible_to(), None);
    }
}
