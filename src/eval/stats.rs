//! The statistics of an eval: Wilson intervals for an accuracy, a paired bootstrap interval
//! for the difference of two arms on the same questions, the exact McNemar test, plurality
//! votes and latency percentiles. Pure and seeded: the same inputs give the same figures.

use std::collections::HashMap;

use crate::modes::common::SplitMix64;

/// z for a two-sided 95% interval.
pub const Z95: f64 = 1.959_963_984_540_054;

/// The Wilson score interval of `k` successes in `n` trials at `z` (95%: [`Z95`]). Unlike the
/// normal approximation it stays inside [0, 1] and is honest at 0/n and n/n. `n = 0`: [0, 1].
pub fn wilson(k: u64, n: u64, z: f64) -> (f64, f64) {
    if n == 0 {
        return (0.0, 1.0);
    }
    let n_f = n as f64;
    let p = k.min(n) as f64 / n_f;
    let z2 = z * z;
    let centre = (p + z2 / (2.0 * n_f)) / (1.0 + z2 / n_f);
    let half = z / (1.0 + z2 / n_f) * (p * (1.0 - p) / n_f + z2 / (4.0 * n_f * n_f)).sqrt();
    ((centre - half).max(0.0), (centre + half).min(1.0))
}

/// How many resamples [`paired_bootstrap`] draws.
pub const BOOTSTRAP_RESAMPLES: usize = 2000;

/// A 95% percentile-bootstrap interval of `mean(a) - mean(b)`, resampling questions (pairs),
/// so that an arm's advantage on the same questions is judged against the questions' own
/// difficulty. `a[i]` and `b[i]` are the two arms' correctness on question `i`. The point
/// estimate and the interval; (0, 0, 0) for no pairs.
pub fn paired_bootstrap(a: &[bool], b: &[bool], seed: u64) -> (f64, f64, f64) {
    let n = a.len().min(b.len());
    if n == 0 {
        return (0.0, 0.0, 0.0);
    }
    let diffs: Vec<i32> = (0..n).map(|i| i32::from(a[i]) - i32::from(b[i])).collect();
    let point = diffs.iter().sum::<i32>() as f64 / n as f64;
    let mut rng = SplitMix64::new(seed);
    let mut means: Vec<f64> = (0..BOOTSTRAP_RESAMPLES)
        .map(|_| (0..n).map(|_| diffs[rng.below(n)]).sum::<i32>() as f64 / n as f64)
        .collect();
    means.sort_by(f64::total_cmp);
    let at = |q: f64| means[((q * (means.len() - 1) as f64).round() as usize).min(means.len() - 1)];
    (point, at(0.025), at(0.975))
}

/// The exact two-sided McNemar p-value: of the questions where the arms differ, `only_a` were
/// right only in A and `only_b` only in B; under no difference each split is a fair coin.
pub fn mcnemar_p(only_a: u64, only_b: u64) -> f64 {
    let n = only_a + only_b;
    if n == 0 {
        return 1.0;
    }
    let k = only_a.min(only_b);
    // P(X ≤ k) for X ~ Binomial(n, 1/2), in logs to stay finite for large n.
    let ln_half_n = n as f64 * 0.5f64.ln();
    let mut ln_c = 0.0; // ln C(n, 0)
    let mut tail = 0.0;
    for i in 0..=k {
        if i > 0 {
            ln_c += ((n - i + 1) as f64).ln() - (i as f64).ln();
        }
        tail += (ln_c + ln_half_n).exp();
    }
    (2.0 * tail).min(1.0)
}

/// The plurality of the answers given (None: no readable answer). The answer given most often
/// wins; a tie for the most is **no majority** (None): the panel did not settle on one answer,
/// and the eval counts that as unparsed, hence wrong. With two candidate answers (right and
/// one wrong one, as the oracle sims give) this makes a vote of `n` independent members right
/// exactly when more than half of them are, whatever `n`.
pub fn plurality(answers: &[Option<String>]) -> Option<String> {
    let mut counts: HashMap<&str, usize> = HashMap::new();
    for a in answers.iter().flatten() {
        *counts.entry(a.as_str()).or_insert(0) += 1;
    }
    let top = *counts.values().max()?;
    let mut leaders = counts.iter().filter(|(_, c)| **c == top);
    let (first, _) = leaders.next()?;
    if leaders.next().is_some() {
        return None;
    }
    Some(first.to_string())
}

/// The `q` quantile (0..1) of some values by the nearest-rank method; 0 for none.
pub fn percentile(values: &[u64], q: f64) -> u64 {
    if values.is_empty() {
        return 0;
    }
    let mut v = values.to_vec();
    v.sort_unstable();
    let rank = (q * v.len() as f64).ceil().max(1.0) as usize;
    v[rank.min(v.len()) - 1]
}

/// The probability that a plurality of `n` independent members, each right with probability
/// `p` and otherwise giving the same wrong answer, is right: more than half of them right.
pub fn majority_expectation(n: u32, p: f64) -> f64 {
    (0..=n)
        .filter(|k| 2 * k > n)
        .map(|k| binomial(n, k) * p.powi(k as i32) * (1.0 - p).powi((n - k) as i32))
        .sum()
}

fn binomial(n: u32, k: u32) -> f64 {
    (0..k).fold(1.0, |acc, i| acc * f64::from(n - i) / f64::from(i + 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-4
    }

    #[test]
    fn wilson_matches_published_values() {
        // 81 of 263 (Wilson 1927 / Newcombe 1998's example): 0.2553 to 0.3662.
        let (lo, hi) = wilson(81, 263, Z95);
        assert!(close(lo, 0.2553) && close(hi, 0.3662), "{lo} {hi}");
        let (lo, hi) = wilson(0, 10, Z95);
        assert!(lo == 0.0 && close(hi, 0.2775), "{hi}");
        let (lo, hi) = wilson(10, 10, Z95);
        assert!(close(lo, 0.7225) && close(hi, 1.0), "{lo} {hi}");
        assert_eq!(wilson(0, 0, Z95), (0.0, 1.0));
    }

    #[test]
    fn exact_majority_expectations() {
        assert!(close(majority_expectation(3, 0.6), 0.648));
        assert!(close(majority_expectation(5, 0.6), 0.68256));
        assert!(close(majority_expectation(1, 0.6), 0.6));
        // Even panels: a tie is no majority.
        assert!(close(majority_expectation(2, 0.6), 0.36));
    }

    #[test]
    fn plurality_counts_answers_and_a_tie_is_no_majority() {
        let s = |v: &[Option<&str>]| v.iter().map(|a| a.map(str::to_string)).collect::<Vec<_>>();
        assert_eq!(plurality(&s(&[Some("4"), Some("5"), Some("4")])), Some("4".into()));
        assert_eq!(plurality(&s(&[Some("4"), Some("5"), None])), None, "a 1-1 tie");
        assert_eq!(plurality(&s(&[Some("4"), None, None])), Some("4".into()));
        assert_eq!(plurality(&s(&[None, None])), None);
        assert_eq!(plurality(&s(&[Some("A"), Some("B"), Some("C"), Some("B")])), Some("B".into()));
    }

    #[test]
    fn the_paired_bootstrap_brackets_the_difference() {
        let a: Vec<bool> = (0..100).map(|i| i % 10 < 7).collect();
        let b: Vec<bool> = (0..100).map(|i| i % 10 < 5).collect();
        let (d, lo, hi) = paired_bootstrap(&a, &b, 7);
        assert!(close(d, 0.2) && lo < 0.2 && hi > 0.2 && lo > 0.0, "{d} {lo} {hi}");
        assert_eq!(paired_bootstrap(&a, &b, 7), (d, lo, hi), "seeded");
        let (d, lo, hi) = paired_bootstrap(&a, &a, 7);
        assert_eq!((d, lo, hi), (0.0, 0.0, 0.0), "identical arms differ by nothing");
    }

    #[test]
    fn mcnemar_is_exact() {
        assert!(close(mcnemar_p(0, 0), 1.0));
        // 10 discordant pairs all one way: 2 × 0.5^10.
        assert!(close(mcnemar_p(10, 0), 2.0 * 0.5f64.powi(10)));
        assert!(close(mcnemar_p(5, 5), 1.0));
        assert!(mcnemar_p(3000, 2000).is_finite());
    }

    #[test]
    fn percentiles_by_nearest_rank() {
        let v: Vec<u64> = (1..=100).collect();
        assert_eq!(percentile(&v, 0.5), 50);
        assert_eq!(percentile(&v, 0.95), 95);
        assert_eq!(percentile(&[7], 0.95), 7);
        assert_eq!(percentile(&[], 0.5), 0);
    }
}
