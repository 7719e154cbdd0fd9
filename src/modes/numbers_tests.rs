use super::*;
use proptest::prelude::*;

fn n(s: &str) -> Option<f64> {
    read_number(s)
}

#[test]
fn grouping_and_decimal_marks_follow_the_documented_rule() {
    for (text, want) in [
        ("1,234", Some(1234.0)),
        ("1,234,567", Some(1_234_567.0)),
        ("1,234.5", Some(1234.5)),
        ("1.234", Some(1.234)),
        ("1.234.567", Some(1_234_567.0)),
        ("1.234.567,89", Some(1_234_567.89)),
        ("1.234,5", Some(1234.5)),
        ("1 234 567", Some(1_234_567.0)),
        ("1\u{202f}234,5", Some(1234.5)),
        ("1'234'567", Some(1_234_567.0)),
        ("3,2", Some(3.2)),
        ("3,25", Some(3.25)),
        ("1,2345", Some(1.2345)),
        ("0,123", Some(0.123)),
        ("1234,5", Some(1234.5)),
        (".5", Some(0.5)),
        ("42", Some(42.0)),
        ("1,23,456", None),
        ("1.2.3", None),
        ("12.05.2023", None),
        ("1,234,5", None),
        ("10:30", None),
        ("12/05/2023", None),
    ] {
        assert_eq!(n(text), want, "{text}");
    }
}

#[test]
fn exponents_scales_currencies_and_percentages() {
    for (text, want) in [
        ("3.2e6", 3.2e6),
        ("3.2E+06", 3.2e6),
        ("3.2 x 10^6", 3.2e6),
        ("≈ 3.2 × 10⁶", 3.2e6),
        ("3.2*10**6", 3.2e6),
        ("$3.2 \\times 10^{6}$", 3.2e6),
        ("3.2 \\cdot 10^6", 3.2e6),
        ("10^6", 1e6),
        ("10⁶", 1e6),
        ("5 × 10⁻³", 5e-3),
        ("3,2 millions", 3.2e6),
        ("$1.2B", 1.2e9),
        ("€3.4 bn", 3.4e9),
        ("34M", 34e6),
        ("34 MM", 34e6),
        ("40k", 40e3),
        ("$40m", 40e6),
        ("3T", 3e12),
        ("12.5%", 12.5),
        ("12,5 %", 12.5),
        ("12.5 percent", 12.5),
        ("-7", -7.0),
        ("−7", -7.0),
        ("-$5", -5.0),
        ("$-5", -5.0),
        ("~40", 40.0),
        ("about 40", 40.0),
        ("3,4 Mio. €", 3.4e6),
        ("2 Milliarden", 2e9),
        ("1,5 mil millones", 1.5e9),
        ("2 billones", 2e12),
        ("1/3", 1.0 / 3.0),
        ("US$ 7", 7.0),
    ] {
        assert_eq!(n(text), Some(want), "{text}");
    }
    let p = read_stated("12.5%", Lead::Strict).unwrap();
    assert!(p.percent);
    // Lower-case m after a bare number is metres.
    assert_eq!(n("330m"), Some(330.0));
    assert_eq!(n("5 t"), Some(5.0));
}

#[test]
fn words_and_marks_around_numbers_are_not_numbers() {
    assert!(find_numbers("H2O A1 COVID-19 the 21st century, the 1990s").is_empty());
    assert_eq!(find_numbers("v1.2.3 then 7").iter().map(|n| n.value).collect::<Vec<_>>(), [7.0]);
    let years: Vec<bool> = find_numbers("in 2030 about 45").iter().map(|n| n.year_like).collect();
    assert_eq!(years, [true, false]);
}

#[test]
fn a_calculation_states_its_result() {
    assert_eq!(n("2.9M × 0.7 = 2.03M"), Some(2.03e6));
    assert_eq!(n("3000 * 1.5 = 4500"), Some(4500.0));
    assert_eq!(n("about 40 (= 35 + 5)"), Some(40.0));
    assert_eq!(n("≈ 3.2 × 10⁶"), Some(3.2e6));
}

#[test]
fn ranges_give_their_midpoint_unless_a_most_likely_value_is_stated() {
    let s = read_stated("30-40 million", Lead::Strict).unwrap();
    assert_eq!((s.value, s.range), (35e6, Some((30e6, 40e6))));
    let s = read_stated("between 30 and 40 million, most likely 34 million", Lead::Strict);
    assert_eq!(s.map(|s| (s.value, s.range)), Some((34e6, None)));
    assert_eq!(n("30 to 40"), Some(35.0));
    assert_eq!(n("$30M-$40M"), Some(35e6));
    assert_eq!(n("entre 30 y 40"), Some(35.0));
    assert_eq!(n("zwischen 30 und 40"), Some(35.0));
    assert_eq!(n("10-15%"), Some(12.5));
    assert_eq!(n("1,000 to 2 million"), Some(1000.0 / 2.0 + 1e6));
    assert_eq!(n("-5 to -3"), Some(-4.0));
    assert_eq!(n("40 ± 5"), Some(40.0));
    assert_eq!(n("30 and 40"), Some(30.0), "no range without 'between'");
}

#[test]
fn a_strict_lead_takes_only_hedging_words_and_a_label_lead_no_refusal() {
    assert_eq!(n("the 2020 data says 40"), None);
    assert_eq!(n("approximately 40"), Some(40.0));
    let l = |s: &str| read_stated(s, Lead::Label).map(|s| s.value);
    assert_eq!(l("The number will be about 45 million"), Some(45e6));
    assert_eq!(l("By 2030, about 45 million"), Some(45e6));
    assert_eq!(l("2030: 45 million"), Some(45e6));
    assert_eq!(l("in 2035"), Some(2035.0));
    assert_eq!(l("unknown; the 2020 data is missing"), None);
    assert_eq!(l("I cannot estimate this; the 2020 data is missing"), None);
    assert_eq!(l("N/A (maybe 40)"), None);
    assert_eq!(l("The 2020 census counted 300; growth suggests 400"), None);
    assert_eq!(l("The number will be about 45 million (up from 30 million in 2020)"), Some(45e6));
    assert_eq!(l("2035 (about 10 years from now)"), Some(2035.0));
    assert_eq!(l("There are 45 million"), Some(45e6));
}

proptest! {
    #[test]
    fn numbers_are_always_finite(s in "\\PC{0,120}") {
        for n in find_numbers(&s) {
            prop_assert!(n.value.is_finite());
            prop_assert!(n.start < n.end && n.end <= s.len());
        }
        for lead in [Lead::Strict, Lead::Label] {
            if let Some(v) = read_stated(&s, lead) {
                prop_assert!(v.value.is_finite());
            }
        }
    }

    #[test]
    fn digit_heavy_text_stays_finite(s in "[0-9eE.,x×^⁰¹²³⁴⁵⁶⁷⁸⁹⁻ %$MBkT-]{0,60}") {
        for lead in [Lead::Strict, Lead::Label] {
            if let Some(v) = read_stated(&s, lead) {
                prop_assert!(v.value.is_finite());
            }
        }
    }

    /// Issue 33 point 11: the answer of a text that states no number (numbers in
    /// passing, refusals, templates, a draft estimate inside `<think>`) reads as none,
    /// strictly or after a label.
    #[test]
    fn text_that_states_no_number_reads_as_none(
        text in crate::modes::ranking::tests::unstated(),
        lead_in in proptest::sample::select(vec![
            "", "unknown; ", "N/A (", "I cannot estimate this: ", "no estimate, as ",
            "[your number] ", "hard to say; ",
        ]),
    ) {
        let text = format!("{lead_in}{text}");
        let answer = crate::modes::reading::answer_text(&text);
        prop_assert_eq!(read_stated(&answer, Lead::Strict), None, "strict: {}", text);
        prop_assert_eq!(read_stated(&answer, Lead::Label), None, "label: {}", text);
    }

    #[test]
    fn written_integers_read_back(v in -1_000_000_000i64..1_000_000_000) {
        prop_assert_eq!(read_number(&v.to_string()), Some(v as f64));
    }
}
