//! The eval's spending budget: tokens and cost used, and room held for the calls in flight.

use super::*;

/// The eval's budget, kept call by call over all its runs (a [`SpendGuard`]): what is spent
/// (recorded before, and every call since) and the worst case of the calls in flight. A call
/// starts only if its worst case fits beside them; it waits while calls in flight hold the room
/// it needs, and is refused when it would not fit even alone, which cancels its run.
///
/// A call's worst-case cost is its worst-case tokens at its model's price bound: the least
/// `cost / completion tokens` seen of that model, which is at least its output price and so at
/// least its input price (output costs at least as much as input on every provider), so the
/// bound holds whatever the mix. Before a model has reported a cost, its calls go one at a
/// time, weighed at no cost: a cost budget can be passed by that first call's cost.
pub(super) struct Budget {
    pub(super) tokens: Option<u64>,
    pub(super) cost: Option<f64>,
    pub(super) state: Mutex<BudgetState>,
}

/// A call in flight: its worst case and its model.
#[derive(Debug, Clone)]
pub(super) struct Held {
    pub(super) tokens: u64,
    pub(super) cost: f64,
    pub(super) model: String,
    /// Weighed at a known price.
    pub(super) priced: bool,
}

#[derive(Default)]
pub(super) struct BudgetState {
    pub(super) spent: (u64, f64),
    /// The calls in flight, by run and call key.
    pub(super) reserved: HashMap<(String, String), Held>,
    /// Per model, the least cost per completion token seen.
    pub(super) prices: HashMap<String, f64>,
    /// The worst case (tokens) of the call refused, once one is.
    pub(super) refused: Option<u64>,
}

impl BudgetState {
    /// What the calls in flight hold (tokens, cost).
    pub(super) fn held(&self) -> (u64, f64) {
        self.reserved.values().fold((0, 0.0), |a, h| (a.0 + h.tokens, a.1 + h.cost))
    }

    /// Counts what a call (or an attempt) of `held` used: as reported, nothing, or, when not
    /// known, the worst case it was admitted at.
    pub(super) fn count(&mut self, used: Used, held: Option<&Held>) {
        let (t, c) = match used {
            Used::Reported(u) => {
                let t = u.prompt_tokens + u.completion_tokens;
                if let (Some(cost), Some(h)) = (u.cost, held) {
                    if u.completion_tokens > 0 {
                        let p = cost / u.completion_tokens as f64;
                        let e = self.prices.entry(h.model.clone()).or_insert(p);
                        *e = e.min(p);
                    }
                }
                (t, u.cost.unwrap_or(0.0))
            }
            Used::Nothing => (0, 0.0),
            Used::Unknown => held.map_or((0, 0.0), |h| (h.tokens, h.cost)),
        };
        self.spent = (self.spent.0 + t, self.spent.1 + c);
    }
}

impl Budget {
    pub(super) fn new(tokens: Option<u64>, cost: Option<f64>, spent: (u64, f64)) -> Self {
        let state = BudgetState { spent, ..Default::default() };
        Budget { tokens, cost, state: Mutex::new(state) }
    }

    pub(super) fn lock(&self) -> std::sync::MutexGuard<'_, BudgetState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(super) fn limited(&self) -> bool {
        self.tokens.is_some() || self.cost.is_some()
    }

    /// The guard a run of the eval is started with: none without a budget.
    pub(super) fn guard(self: &Arc<Self>) -> Option<Arc<dyn SpendGuard>> {
        self.limited().then(|| self.clone() as Arc<dyn SpendGuard>)
    }

    pub(super) fn spent(&self) -> (u64, f64) {
        self.lock().spent
    }

    /// Whether a call refused to start (and so its run was cancelled).
    pub(super) fn refused(&self) -> bool {
        self.lock().refused.is_some()
    }

    /// `spent` plus `extra` is within the budget.
    pub(super) fn fits(&self, spent: (u64, f64), extra: (u64, f64)) -> bool {
        self.tokens.is_none_or(|b| spent.0 + extra.0 <= b)
            && self.cost.is_none_or(|b| spent.1 + extra.1 <= b + 1e-12)
    }

    /// What is used, in words (`1200 of a 1500-token budget used`).
    pub(super) fn used(&self) -> String {
        let (t, c) = self.spent();
        let mut parts = Vec::new();
        if let Some(b) = self.tokens {
            parts.push(format!("{t} of a {b}-token budget used"));
        }
        if let Some(b) = self.cost {
            parts.push(format!("${c:.4} of a ${b} budget used"));
        }
        parts.join(", ")
    }
}

impl SpendGuard for Budget {
    fn admit(&self, run: &str, key: &str, model: &str, size: CallSize) -> Admit {
        if !self.limited() {
            return Admit::Go;
        }
        let mut st = self.lock();
        let t = size.worst_tokens();
        let price = st.prices.get(model).copied();
        if self.cost.is_some()
            && price.is_none()
            && st.reserved.values().any(|h| h.model == model && !h.priced)
        {
            // Its price is not known yet: one call of it at a time.
            return Admit::Wait;
        }
        let worst = Held {
            tokens: t,
            cost: t as f64 * price.unwrap_or(0.0),
            model: model.to_string(),
            priced: price.is_some(),
        };
        let held = st.held();
        if self.fits(st.spent, (held.0 + worst.tokens, held.1 + worst.cost)) {
            st.reserved.insert((run.to_string(), key.to_string()), worst);
            Admit::Go
        } else if !st.reserved.is_empty() && self.fits(st.spent, (worst.tokens, worst.cost)) {
            Admit::Wait
        } else {
            st.refused = Some(t);
            Admit::Refuse
        }
    }

    fn settle(&self, run: &str, key: &str, used: Used) {
        let mut st = self.lock();
        let held = st.reserved.remove(&(run.to_string(), key.to_string()));
        st.count(used, held.as_ref());
    }

    fn retry(&self, run: &str, key: &str, used: Used) -> bool {
        if !self.limited() {
            return true;
        }
        let mut st = self.lock();
        let id = (run.to_string(), key.to_string());
        let held = st.reserved.get(&id).cloned();
        st.count(used, held.as_ref());
        // The next attempt holds the same reservation: all that is held must still fit.
        if self.fits(st.spent, st.held()) {
            true
        } else {
            st.reserved.remove(&id);
            st.refused = Some(held.map_or(0, |h| h.tokens));
            false
        }
    }

    fn refusal(&self) -> String {
        format!("the eval's budget would not cover its next model call ({})", self.used())
    }
}

impl Budget {
    /// Why the eval stopped on its budget, in words.
    pub(super) fn stop_note(&self) -> String {
        let next = match self.lock().refused {
            Some(t) => format!(", and the next model call could use up to {t} tokens"),
            None => String::new(),
        };
        format!(
            "budget reached: {}{next}; the eval stopped before any call could exceed it",
            self.used()
        )
    }
}
