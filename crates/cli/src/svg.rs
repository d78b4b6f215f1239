//! The comparison as an SVG figure: the whole run under each variant against native, queue
//! search time speedups over `list` (grouped bars per engine: point-to-point, collective, all)
//! and the queues each engine allocated, on a log scale (4 and 12,800 on one axis).

use crate::compare::Comparison;
use std::fmt::Write;

const WIDTH: f64 = 900.0;
const LEFT: f64 = 80.0;
const RIGHT: f64 = 720.0;
const LEGEND_X: f64 = 740.0;
/// The first panel's top, each panel's height and the space between panels.
const FIRST_TOP: f64 = 78.0;
const PANEL_HEIGHT: f64 = 230.0;
const PANEL_GAP: f64 = 90.0;
/// Characters of the 13-pixel note that fit across the figure.
const NOTE_CHARS: usize = 110;
const WALL_COLORS: [&str; 1] = ["#9c755f"];
const WALL_LABELS: [&str; 1] = ["native / variant"];
const SPEEDUP_COLORS: [&str; 3] = ["#4e79a7", "#f28e2b", "#59a14f"];
const SPEEDUP_LABELS: [&str; 3] = ["point-to-point", "collective", "all"];
const QUEUE_COLORS: [&str; 2] = ["#76b7b2", "#b07aa1"];
const QUEUE_LABELS: [&str; 2] = ["mean over ranks", "max over ranks"];

pub fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// A round axis top at or above `max` and a tick step giving about five ticks.
fn nice_axis(max: f64) -> (f64, f64) {
    let max = if max > 0.0 { max } else { 1.0 };
    let raw = max / 5.0;
    let magnitude = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 2.5, 5.0, 10.0]
        .iter()
        .map(|m| m * magnitude)
        .find(|s| *s >= raw * 0.999)
        .unwrap_or(10.0 * magnitude);
    ((max / step - 1e-9).ceil() * step, step)
}

fn number(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// One panel of grouped bars: `values[engine][series]` (None: no bar), with axes and legend.
struct Panel<'a> {
    top: f64,
    bottom: f64,
    title: &'a str,
    y_label: &'a str,
    labels: &'a [&'a str],
    colors: &'a [&'a str],
    engines: Vec<&'a str>,
    values: Vec<Vec<Option<f64>>>,
    /// A dashed reference line and its legend entry.
    reference: Option<(f64, &'a str)>,
    format: fn(f64) -> String,
    /// A log scale from 1 up to the decade above the largest value.
    log: bool,
}

impl Panel<'_> {
    fn draw(&self, svg: &mut String) {
        let (top, bottom) = (self.top, self.bottom);
        let data_max = self
            .values
            .iter()
            .flatten()
            .flatten()
            .copied()
            .fold(0.0, f64::max);
        let reference = self.reference.map_or(0.0, |(v, _)| v);
        let (axis_max, step) = if self.log {
            let decades = data_max.max(reference).max(10.0).log10().ceil();
            (10f64.powf(decades), 10.0)
        } else {
            nice_axis(data_max.max(reference) * 1.08)
        };
        let log = self.log;
        let y = |v: f64| {
            let share = if log {
                v.max(1.0).log10() / axis_max.log10()
            } else {
                v / axis_max
            };
            bottom - (bottom - top) * share
        };
        let _ = writeln!(
            svg,
            r#"<text x="{LEFT}" y="{}" font-size="15" font-weight="bold">{}</text>"#,
            top - 14.0,
            escape(self.title)
        );
        // Grid and y ticks, with as many decimals as the step needs; decades on a log scale.
        let decimals = if log {
            0
        } else {
            (0..3)
                .find(|d| (step * 10f64.powi(*d)).fract().abs() < 1e-6)
                .unwrap_or(3) as usize
        };
        let ticks: Vec<f64> = if log {
            (0..=axis_max.log10().round() as i32)
                .map(|e| 10f64.powi(e))
                .collect()
        } else {
            (0..=(axis_max / step).round() as usize)
                .map(|i| step * i as f64)
                .collect()
        };
        for tick in ticks {
            let ty = y(tick);
            let _ = writeln!(
                svg,
                r##"<line x1="{LEFT}" y1="{ty:.1}" x2="{RIGHT}" y2="{ty:.1}" stroke="#e0e0e0"/><text x="{}" y="{:.1}" font-size="11" text-anchor="end">{tick:.decimals$}</text>"##,
                LEFT - 6.0,
                ty + 4.0,
            );
        }
        let middle = (top + bottom) / 2.0;
        let _ = writeln!(
            svg,
            r#"<text x="{}" y="{middle:.1}" font-size="12" text-anchor="middle" transform="rotate(-90 {} {middle:.1})">{}</text>"#,
            LEFT - 48.0,
            LEFT - 48.0,
            escape(self.y_label)
        );
        // Bars, grouped by engine.
        let group = (RIGHT - LEFT) / self.engines.len().max(1) as f64;
        let bar = group * 0.75 / self.labels.len() as f64;
        for (i, (engine, values)) in self.engines.iter().zip(&self.values).enumerate() {
            let start = LEFT + group * i as f64 + group * 0.125;
            for (j, value) in values.iter().enumerate() {
                let x = start + bar * j as f64;
                let center = x + bar / 2.0;
                match value {
                    Some(v) => {
                        let _ = writeln!(
                            svg,
                            r#"<rect class="bar" x="{x:.1}" y="{:.1}" width="{:.1}" height="{:.1}" fill="{}"><title>{}: {} {}</title></rect>"#,
                            y(*v),
                            bar * 0.92,
                            bottom - y(*v),
                            self.colors[j],
                            escape(engine),
                            self.labels[j],
                            (self.format)(*v)
                        );
                        // Narrow bars get their value written upwards.
                        let label_y = y(*v) - 4.0;
                        let rotate = if bar < 24.0 {
                            format!(
                                r#" text-anchor="start" transform="rotate(-90 {center:.1} {label_y:.1})""#
                            )
                        } else {
                            r#" text-anchor="middle""#.to_string()
                        };
                        let _ = writeln!(
                            svg,
                            r#"<text x="{center:.1}" y="{label_y:.1}" font-size="10"{rotate}>{}</text>"#,
                            (self.format)(*v)
                        );
                    }
                    None => {
                        let _ = writeln!(
                            svg,
                            r##"<text x="{center:.1}" y="{:.1}" font-size="9" fill="#888" text-anchor="middle">n/a</text>"##,
                            bottom - 4.0
                        );
                    }
                }
            }
            let _ = writeln!(
                svg,
                r#"<text x="{:.1}" y="{:.1}" font-size="12" text-anchor="middle">{}</text>"#,
                LEFT + group * (i as f64 + 0.5),
                bottom + 18.0,
                escape(engine)
            );
        }
        if let Some((value, _)) = self.reference {
            let ry = y(value);
            let _ = writeln!(
                svg,
                r##"<line x1="{LEFT}" y1="{ry:.1}" x2="{RIGHT}" y2="{ry:.1}" stroke="#d62728" stroke-dasharray="6 4"/>"##
            );
        }
        // Axes.
        let _ = writeln!(
            svg,
            r##"<path d="M{LEFT} {top} V{bottom} H{RIGHT}" fill="none" stroke="#333"/>"##
        );
        // Legend.
        let mut ly = top + 6.0;
        for (label, color) in self.labels.iter().zip(self.colors) {
            let _ = writeln!(
                svg,
                r#"<rect x="{LEGEND_X}" y="{:.1}" width="12" height="12" fill="{color}"/><text x="{}" y="{ly:.1}" font-size="12">{}</text>"#,
                ly - 10.0,
                LEGEND_X + 18.0,
                escape(label)
            );
            ly += 20.0;
        }
        if let Some((_, label)) = self.reference {
            let _ = writeln!(
                svg,
                r##"<line x1="{LEGEND_X}" y1="{:.1}" x2="{}" y2="{:.1}" stroke="#d62728" stroke-dasharray="6 4"/><text x="{}" y="{ly:.1}" font-size="12">{}</text>"##,
                ly - 4.0,
                LEGEND_X + 12.0,
                ly - 4.0,
                LEGEND_X + 18.0,
                escape(label)
            );
        }
    }
}

/// The program as the note names it: its file name and arguments, cut to fit.
fn program_label(program: &[String]) -> String {
    let mut words = program.to_vec();
    if let Some(first) = words.first_mut() {
        if let Some(name) = std::path::Path::new(first.as_str()).file_name() {
            *first = name.to_string_lossy().into_owned();
        }
    }
    let label = words.join(" ");
    if label.chars().count() <= NOTE_CHARS / 2 {
        return label;
    }
    label.chars().take(NOTE_CHARS / 2 - 1).collect::<String>() + "…"
}

pub fn plot(c: &Comparison) -> String {
    let engines: Vec<&str> = c.engines.iter().map(|e| e.engine.as_str()).collect();
    let against_native = c.native_wall.median > 0;
    let panels = if against_native { 3.0 } else { 2.0 };
    let height = FIRST_TOP + panels * PANEL_HEIGHT + (panels - 1.0) * PANEL_GAP + 60.0;
    let mut svg = format!(
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" viewBox="0 0 {WIDTH} {height}" font-family="DejaVu Sans, Helvetica, Arial, sans-serif">
<rect width="100%" height="100%" fill="white"/>
"#
    );
    let measure = if c.measure.is_empty() {
        format!("median of {} runs", c.repeat)
    } else {
        c.measure.clone()
    };
    let note = format!(
        "{}: {} ranks, {}, {measure}",
        program_label(&c.program),
        c.ranks,
        c.mpi,
    );
    let _ = writeln!(
        svg,
        r##"<text x="{LEFT}" y="26" font-size="13" fill="#444">{}</text>"##,
        escape(&note)
    );
    let mut top = FIRST_TOP;
    let mut next = || {
        let at = (top, top + PANEL_HEIGHT);
        top += PANEL_HEIGHT + PANEL_GAP;
        at
    };
    if against_native {
        let (t, b) = next();
        Panel {
            top: t,
            bottom: b,
            title: "Whole run against native: times faster (median wall time)",
            y_label: "native / variant (x)",
            labels: &WALL_LABELS,
            colors: &WALL_COLORS,
            engines: engines.clone(),
            values: c.engines.iter().map(|e| vec![e.wall_speedup]).collect(),
            reference: Some((1.0, "native = 1")),
            format: number,
            log: false,
        }
        .draw(&mut svg);
    }
    let (t, b) = next();
    Panel {
        top: t,
        bottom: b,
        title: "Queue search time speedup over list (engine time, summed over ranks)",
        y_label: "speedup (x)",
        labels: &SPEEDUP_LABELS,
        colors: &SPEEDUP_COLORS,
        engines: engines.clone(),
        values: c.engines.iter().map(|e| e.speedup.to_vec()).collect(),
        reference: Some((1.0, "list = 1")),
        format: number,
        log: false,
    }
    .draw(&mut svg);
    let (t, b) = next();
    Panel {
        top: t,
        bottom: b,
        title: "Queues allocated per rank (log scale)",
        y_label: "queues",
        labels: &QUEUE_LABELS,
        colors: &QUEUE_COLORS,
        engines,
        values: c
            .engines
            .iter()
            .map(|e| vec![Some(e.queues_mean), Some(e.queues_max as f64)])
            .collect(),
        reference: None,
        format: |v| {
            if v.fract() == 0.0 {
                format!("{v:.0}")
            } else {
                format!("{v:.1}")
            }
        },
        log: true,
    }
    .draw(&mut svg);
    svg.push_str("</svg>\n");
    svg
}

/// One line of a [`lines`] chart: a value per x position (None: no point there).
pub struct Series {
    pub name: String,
    pub color: &'static str,
    pub values: Vec<Option<f64>>,
    pub dashed: bool,
}

/// Where a [`lines`] chart's values sit on its y axis.
fn y_axis(values: &[f64], log: bool) -> (f64, f64, Vec<f64>) {
    let max = values.iter().copied().fold(0.0, f64::max);
    if log {
        let min = values
            .iter()
            .copied()
            .filter(|v| *v > 0.0)
            .fold(f64::MAX, f64::min);
        let (lo, hi) = (min.max(1e-3).log10().floor(), max.max(1e-3).log10().ceil());
        let hi = if hi <= lo { lo + 1.0 } else { hi };
        let ticks = (lo as i32..=hi as i32).map(|e| 10f64.powi(e)).collect();
        (10f64.powf(lo), 10f64.powf(hi), ticks)
    } else {
        let (top, step) = nice_axis(max * 1.08);
        let ticks = (0..=(top / step).round() as usize)
            .map(|i| step * i as f64)
            .collect();
        (0.0, top, ticks)
    }
}

/// A chart of lines over categorical x positions (`xs`), with a legend; `log_y` puts the y
/// axis on a log scale (for counts that grow with n).
pub fn lines(
    title: &str,
    note: &str,
    (x_label, y_label): (&str, &str),
    xs: &[String],
    series: &[Series],
    log_y: bool,
) -> String {
    // Width, height, and the plot area's left, right, top and bottom edges.
    #[allow(non_snake_case)]
    let (W, H, L, R, T, B) = (900.0, 440.0, 80.0, 560.0, 70.0, 380.0);
    let all: Vec<f64> = series
        .iter()
        .flat_map(|s| s.values.iter().flatten().copied())
        .collect();
    let (lo, hi, ticks) = y_axis(&all, log_y);
    let y = |v: f64| {
        let f = if log_y {
            (v.max(lo).log10() - lo.log10()) / (hi.log10() - lo.log10())
        } else {
            (v - lo) / (hi - lo)
        };
        B - (B - T) * f
    };
    let step = (R - L) / xs.len().max(1) as f64;
    let x = |i: usize| L + step * (i as f64 + 0.5);
    let mut svg = format!(
        r##"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" font-family="DejaVu Sans, Helvetica, Arial, sans-serif">
<rect width="100%" height="100%" fill="white"/>
<text x="{L}" y="28" font-size="15" font-weight="bold">{}</text>
<text x="{L}" y="48" font-size="12" fill="#444">{}</text>
"##,
        escape(title),
        escape(note)
    );
    for tick in &ticks {
        let ty = y(*tick);
        let _ = writeln!(
            svg,
            r##"<line x1="{L}" y1="{ty:.1}" x2="{R}" y2="{ty:.1}" stroke="#e0e0e0"/><text x="{}" y="{:.1}" font-size="11" text-anchor="end">{}</text>"##,
            L - 6.0,
            ty + 4.0,
            number(*tick)
        );
    }
    for (i, label) in xs.iter().enumerate() {
        let _ = writeln!(
            svg,
            r#"<text x="{:.1}" y="{}" font-size="12" text-anchor="middle">{}</text>"#,
            x(i),
            B + 18.0,
            escape(label)
        );
    }
    let _ = writeln!(
        svg,
        r##"<path d="M{L} {T} V{B} H{R}" fill="none" stroke="#333"/><text x="{:.1}" y="{}" font-size="12" text-anchor="middle">{}</text><text x="{}" y="{:.1}" font-size="12" text-anchor="middle" transform="rotate(-90 {} {:.1})">{}</text>"##,
        (L + R) / 2.0,
        B + 40.0,
        escape(x_label),
        L - 55.0,
        (T + B) / 2.0,
        L - 55.0,
        (T + B) / 2.0,
        escape(y_label)
    );
    let mut ly = T + 6.0;
    for s in series {
        let dash = if s.dashed {
            r#" stroke-dasharray="6 4""#
        } else {
            ""
        };
        let points: Vec<String> = s
            .values
            .iter()
            .enumerate()
            .filter_map(|(i, v)| v.map(|v| format!("{:.1},{:.1}", x(i), y(v))))
            .collect();
        let _ = writeln!(
            svg,
            r#"<polyline class="line" points="{}" fill="none" stroke="{}" stroke-width="2"{dash}/>"#,
            points.join(" "),
            s.color
        );
        for (i, v) in s.values.iter().enumerate() {
            if let Some(v) = v {
                let _ = writeln!(
                    svg,
                    r#"<circle cx="{:.1}" cy="{:.1}" r="3" fill="{}"><title>{} at {}: {}</title></circle>"#,
                    x(i),
                    y(*v),
                    s.color,
                    escape(&s.name),
                    escape(&xs[i]),
                    number(*v)
                );
            }
        }
        let _ = writeln!(
            svg,
            r#"<line x1="{}" y1="{:.1}" x2="{}" y2="{:.1}" stroke="{}" stroke-width="2"{dash}/><text x="{}" y="{ly:.1}" font-size="12">{}</text>"#,
            R + 20.0,
            ly - 4.0,
            R + 40.0,
            ly - 4.0,
            s.color,
            R + 46.0,
            escape(&s.name)
        );
        ly += 20.0;
    }
    svg.push_str("</svg>\n");
    svg
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compare::tests::fixture;
    use crate::compare::Spread;

    #[test]
    fn axes_are_round() {
        assert_eq!(nice_axis(1.08), (1.25, 0.25));
        assert_eq!(nice_axis(3.3), (4.0, 1.0));
        assert_eq!(nice_axis(73.0), (80.0, 20.0));
        assert_eq!(nice_axis(0.0), (1.0, 0.2));
        assert_eq!(nice_axis(12.0), (12.5, 2.5));
    }

    #[test]
    fn the_plot_has_a_bar_per_value_labels_and_legends() {
        let mut c = fixture();
        c.program = vec!["./a&b".into()];
        let svg = plot(&c);
        assert!(svg.starts_with("<svg ") && svg.ends_with("</svg>\n"));
        // 2 engines x (1 against native + 3 speedups + 2 queue counts).
        assert_eq!(svg.matches(r#"class="bar""#).count(), 12);
        for text in [
            "Whole run against native",
            ">native = 1<",
            "Queue search time speedup over list",
            "Queues allocated per rank (log scale)",
            ">list<",
            ">rank<",
            ">point-to-point<",
            ">collective<",
            ">all<",
            ">list = 1<",
            ">mean over ranks<",
            ">max over ranks<",
            ">speedup (x)<",
            ">a&amp;b: 2 ranks",
            "<title>rank: all 3.03</title>",
        ] {
            assert!(svg.contains(text), "missing {text}");
        }
        assert!(!svg.contains("./a&b"));
        for tag in ["text", "title"] {
            assert_eq!(
                svg.matches(&format!("<{tag}")).count(),
                svg.matches(&format!("</{tag}>")).count()
            );
        }
    }

    #[test]
    fn lines_have_a_point_per_value_and_a_log_axis_by_decades() {
        let series = [
            Series {
                name: "rank".into(),
                color: "#4e79a7",
                values: vec![Some(129.0), Some(8193.0)],
                dashed: false,
            },
            Series {
                name: "cap <k>".into(),
                color: "#888",
                values: vec![None, Some(50.0)],
                dashed: true,
            },
        ];
        let xs = ["64".to_string(), "4096".to_string()];
        let svg = lines("Queues", "note", ("ranks", "queues"), &xs, &series, true);
        assert_eq!(svg.matches("<circle").count(), 3);
        assert_eq!(svg.matches(r#"class="line""#).count(), 2);
        for text in [
            ">100<",
            ">1000<",
            ">10000<",
            ">cap &lt;k&gt;<",
            ">4096<",
            "stroke-dasharray",
        ] {
            assert!(svg.contains(text), "missing {text}");
        }
        let linear = lines("D", "", ("T", "depth"), &xs, &series[..1], false);
        assert!(linear.contains(">2000<") && !linear.contains(">100<"));
    }

    #[test]
    fn queue_counts_are_on_decades_and_long_programs_are_cut() {
        let mut c = fixture();
        c.engines[1].queues_max = 12_800;
        c.program = vec!["/very/long/path/app".into(), "x".repeat(300)];
        let svg = plot(&c);
        for tick in [">1<", ">10<", ">100<", ">1000<", ">10000<", ">100000<"] {
            assert!(svg.contains(tick), "no tick {tick}");
        }
        assert!(!svg.contains("/very/long/"));
        let note = svg.lines().nth(2).unwrap();
        assert!(note.contains("…") && note.len() < 400, "{note}");
        // Replayed traces have no native run: no panel against it.
        c.native_wall = Spread::default();
        assert!(!plot(&c).contains("Whole run against native"));
    }

    #[test]
    fn missing_speedups_are_marked_not_drawn() {
        let mut c = fixture();
        c.engines[1].speedup[1] = None;
        let svg = plot(&c);
        assert_eq!(svg.matches(r#"class="bar""#).count(), 11);
        assert_eq!(svg.matches(">n/a<").count(), 1);
    }
}
