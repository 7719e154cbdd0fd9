//! The table `conclave bench` prints, and the few statistics its figures need. Formatting only:
//! nothing here measures anything.

use std::time::Duration;

/// One line of the table: one figure of one scenario.
#[derive(Debug, Clone, Default)]
pub struct Row {
    pub scenario: u8,
    /// What was run (printed on the scenario's first row only).
    pub setup: String,
    pub metric: String,
    pub value: String,
    /// The ideal measured in the same run, when the figure has one.
    pub ideal: Option<String>,
    /// The figure over its ideal.
    pub ratio: Option<f64>,
    /// The target for the figure ("" when it sets none).
    pub target: String,
    /// Whether the target is met (`None`: no target).
    pub met: Option<bool>,
}

impl Row {
    pub fn new(scenario: u8, metric: &str, value: String) -> Self {
        Row { scenario, metric: metric.to_string(), value, ..Default::default() }
    }

    pub fn ideal(&mut self, ideal: String, ratio: f64) -> &mut Self {
        self.ideal = Some(ideal);
        self.ratio = Some(ratio);
        self
    }

    pub fn target(&mut self, target: &str, met: bool) -> &mut Self {
        self.target = target.to_string();
        self.met = Some(met);
        self
    }
}

/// Rows, then notes (what was measured besides, and how).
#[derive(Debug, Clone, Default)]
pub struct Report {
    pub rows: Vec<Row>,
    pub notes: Vec<String>,
    /// A scenario could not finish (its error is a row).
    pub failed: bool,
}

impl Report {
    /// Starts a scenario's part of the report; `setup` says what was run.
    pub fn scenario(number: u8, setup: &str) -> ScenarioReport {
        ScenarioReport { number, setup: setup.to_string(), report: Report::default() }
    }

    pub fn extend(&mut self, other: Report) {
        self.rows.extend(other.rows);
        self.notes.extend(other.notes);
        self.failed |= other.failed;
    }

    /// The table, aligned, then the notes.
    pub fn render(&self) -> String {
        let header = ["#", "scenario", "metric", "value", "ideal", "ratio", "target", "met"];
        let mut cells: Vec<[String; 8]> = Vec::new();
        let mut last = 0;
        for r in &self.rows {
            let first = r.scenario != last;
            last = r.scenario;
            cells.push([
                if first { r.scenario.to_string() } else { String::new() },
                if first { r.setup.clone() } else { String::new() },
                r.metric.clone(),
                r.value.clone(),
                r.ideal.clone().unwrap_or_default(),
                r.ratio.map(|x| format!("{x:.3}x")).unwrap_or_default(),
                r.target.clone(),
                match r.met {
                    Some(true) => "yes".into(),
                    Some(false) => "NO".into(),
                    None => String::new(),
                },
            ]);
        }
        let mut widths = header.map(|h| h.chars().count());
        for row in &cells {
            for (w, c) in widths.iter_mut().zip(row) {
                *w = (*w).max(c.chars().count());
            }
        }
        let line = |row: &[String]| {
            let mut s = String::new();
            for (i, (c, w)) in row.iter().zip(widths).enumerate() {
                if i > 0 {
                    s.push_str("  ");
                }
                s.push_str(c);
                if i + 1 < row.len() {
                    s.push_str(&" ".repeat(w - c.chars().count()));
                }
            }
            s.trim_end().to_string()
        };
        let mut out = line(&header.map(String::from));
        out.push('\n');
        out.push_str(&line(&widths.map(|w| "-".repeat(w))));
        out.push('\n');
        for row in &cells {
            out.push_str(&line(row));
            out.push('\n');
        }
        for n in &self.notes {
            out.push_str(&format!("- {n}\n"));
        }
        out
    }
}

/// A scenario's rows as they are added: the first carries the setup.
pub struct ScenarioReport {
    number: u8,
    setup: String,
    report: Report,
}

impl ScenarioReport {
    pub fn row(&mut self, metric: &str, value: String) -> &mut Row {
        let mut row = Row::new(self.number, metric, value);
        if self.report.rows.is_empty() {
            row.setup = self.setup.clone();
        }
        self.report.rows.push(row);
        let last = self.report.rows.len() - 1;
        &mut self.report.rows[last]
    }

    pub fn note(&mut self, note: String) {
        self.report.notes.push(format!("[{}] {note}", self.number));
    }

    pub fn finish(self) -> Report {
        self.report
    }
}

/// The `p`-quantile (0..=1) of `values` by nearest rank; 0 for none.
pub fn percentile(values: &[f64], p: f64) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let rank = (p * v.len() as f64).ceil() as usize;
    v[rank.clamp(1, v.len()) - 1]
}

pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// Milliseconds with one decimal under 10 s, seconds above.
pub fn fmt_ms(ms: f64) -> String {
    if ms.abs() >= 10_000.0 {
        format!("{:.2} s", ms / 1000.0)
    } else {
        format!("{ms:.1} ms")
    }
}

/// A deterministic generator (SplitMix64) for the latencies drawn in scenario 5, so every run
/// of the benchmark draws the same ones.
pub struct Draws(u64);

impl Draws {
    pub fn new(seed: u64) -> Self {
        Draws(seed)
    }

    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in (0, 1].
    fn unit(&mut self) -> f64 {
        ((self.next_u64() >> 11) as f64 + 1.0) / (1u64 << 53) as f64
    }

    /// Log-normal with this median and shape `sigma` (Box-Muller).
    pub fn log_normal(&mut self, median: f64, sigma: f64) -> f64 {
        let (u1, u2) = (self.unit(), self.unit());
        let z = (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos();
        median * (sigma * z).exp()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_by_nearest_rank() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&v, 0.5), 50.0);
        assert_eq!(percentile(&v, 0.95), 95.0);
        assert_eq!(percentile(&v, 0.99), 99.0);
        assert_eq!(percentile(&v, 1.0), 100.0);
        assert_eq!(percentile(&[3.0], 0.99), 3.0);
        assert_eq!(percentile(&[], 0.5), 0.0);
    }

    #[test]
    fn draws_are_repeatable_and_log_normal() {
        let a: Vec<f64> = (0..5)
            .map({
                let mut d = Draws::new(7);
                move |_| d.log_normal(1000.0, 0.5)
            })
            .collect();
        let mut d = Draws::new(7);
        let b: Vec<f64> = (0..5).map(|_| d.log_normal(1000.0, 0.5)).collect();
        assert_eq!(a, b);
        let mut d = Draws::new(1);
        let many: Vec<f64> = (0..4000).map(|_| d.log_normal(1000.0, 0.5)).collect();
        let median = percentile(&many, 0.5);
        assert!((900.0..1100.0).contains(&median), "median {median}");
        assert!(many.iter().all(|x| *x > 0.0));
    }

    #[test]
    fn the_table_aligns_and_marks_targets() {
        let mut s = Report::scenario(1, "one run");
        s.row("wall p50", "604.0 ms".into()).ideal("601.0 ms".into(), 1.005);
        s.row("overhead p50", "3.0 ms".into()).target("< 5 ms", true);
        let mut r = s.finish();
        let mut t = Report::scenario(2, "many");
        t.row("p95", "900 ms".into()).target("< 1.25x", false);
        r.extend(t.finish());
        let text = r.render();
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[0].starts_with("#  scenario"), "{text}");
        assert!(lines[2].starts_with("1  one run") && lines[2].contains("1.005x"), "{text}");
        assert!(lines[3].starts_with("   ") && lines[3].ends_with("yes"), "{text}");
        assert!(lines[4].starts_with("2  many") && lines[4].ends_with("NO"), "{text}");
    }
}
