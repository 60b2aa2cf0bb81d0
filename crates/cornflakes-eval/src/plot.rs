//! PNG charts of a `cf compare` run, in the style of the paper's figures.
//!
//! Text is drawn with an embedded DejaVu Sans (see `assets/DejaVuSans-LICENSE.txt`) so that plotting works the
//! same on a bare CI machine as on a desktop: plotters is built without font-kit/fontconfig.

use std::path::Path;
use std::sync::OnceLock;

use plotters::coord::combinators::{IntoLogRange, LogCoord};
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use plotters::style::{register_font, FontStyle};

use crate::Error;

/// The embedded font; plotters keeps a `&'static` to it.
static FONT_TTF: &[u8] = include_bytes!("../assets/DejaVuSans.ttf");
/// Family name every text style below asks for; it is what plotters' defaults use too.
const FONT: &str = "sans-serif";

const SIZE: (u32, u32) = (1000, 620);

/// Distinct, colour-blind-friendly colours (Okabe–Ito), so that lines stay apart on screen and in print.
const COLORS: [RGBColor; 8] = [
    RGBColor(0, 114, 178),
    RGBColor(213, 94, 0),
    RGBColor(0, 158, 115),
    RGBColor(204, 121, 167),
    RGBColor(230, 159, 0),
    RGBColor(86, 180, 233),
    RGBColor(120, 120, 120),
    RGBColor(0, 0, 0),
];

/// One system's curve.
pub struct Series {
    /// The legend entry.
    pub name: String,
    /// (achieved load per second, p99 latency in µs), in the order measured (usually rising offered load).
    pub points: Vec<(f64, f64)>,
}

/// Registers the embedded font once per process; plotters' font table is global.
fn ensure_font() -> Result<(), String> {
    static REGISTERED: OnceLock<Result<(), String>> = OnceLock::new();
    REGISTERED
        .get_or_init(|| {
            register_font(FONT, FontStyle::Normal, FONT_TTF).map_err(|_| "embedded font is not a valid TTF".to_string())
        })
        .clone()
}

/// Refuses other extensions: the bitmap backend picks the image format from the extension, and we promise PNG.
fn check_png_path(path: &Path) -> Result<(), String> {
    match path.extension().and_then(|e| e.to_str()) {
        Some(e) if e.eq_ignore_ascii_case("png") => Ok(()),
        _ => Err(format!("plot path {} must end in .png", path.display())),
    }
}

/// Error mapper naming the file, since the lower-level plotters errors do not.
fn draw_err<E: std::fmt::Display>(path: &Path) -> impl Fn(E) -> String + '_ {
    move |e| format!("drawing {}: {e}", path.display())
}

/// Marker shapes cycled per series, so that curves stay apart even where colours don't (grey print).
#[derive(Clone, Copy)]
enum Marker {
    Circle,
    Triangle,
    Square,
    Diamond,
    TriangleDown,
}

impl Marker {
    fn nth(i: usize) -> Self {
        [Marker::Circle, Marker::Triangle, Marker::Square, Marker::Diamond, Marker::TriangleDown][i % 5]
    }

    /// Vertices in pixels around (0, 0). Every shape is a polygon so that data points and legend entries share one
    /// element type (plotters' `DynElement` cannot be used with a backend that borrows its path).
    fn outline(self) -> Vec<(i32, i32)> {
        match self {
            Marker::Circle => (0..16)
                .map(|k| {
                    let a = f64::from(k) * std::f64::consts::TAU / 16.0;
                    ((5.5 * a.cos()).round() as i32, (5.5 * a.sin()).round() as i32)
                })
                .collect(),
            Marker::Triangle => vec![(0, -7), (6, 4), (-6, 4)],
            Marker::Square => vec![(-5, -5), (5, -5), (5, 5), (-5, 5)],
            Marker::Diamond => vec![(0, -7), (6, 0), (0, 7), (-6, 0)],
            Marker::TriangleDown => vec![(0, 7), (6, -4), (-6, -4)],
        }
    }
}

/// Keeps only points a log-latency plot can show: finite, positive load and latency. Load is turned into thousands.
fn usable_points(points: &[(f64, f64)]) -> Vec<(f64, f64)> {
    points
        .iter()
        .filter(|(x, y)| x.is_finite() && y.is_finite() && *x > 0.0 && *y > 0.0)
        .map(|&(x, y)| (x / 1000.0, y))
        .collect()
}

/// Whole decades around `[lo, hi]`, so that log ticks fall on 1, 10, 100, ... and nothing touches the frame.
fn decade_range(lo: f64, hi: f64) -> (f64, f64) {
    let bottom = 10f64.powf((lo / 1.05).log10().floor());
    let mut top = 10f64.powf((hi * 1.05).log10().ceil());
    if top <= bottom {
        top = bottom * 10.0;
    }
    (bottom, top)
}

/// Tick labels without float noise: "0.5", "2.5", "1000", "1e6" rather than "1000.0000001" or "1000000".
fn tick_label(v: f64) -> String {
    if v.abs() >= 1e6 {
        format!("{v:.0e}")
    } else {
        let s = format!("{v:.3}");
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    }
}

type LatencyChart<'a> = ChartContext<'a, BitMapBackend<'a>, Cartesian2d<RangedCoordf64, LogCoord<f64>>>;

/// Draws `series` into a PNG at `path`: x is achieved load in thousands per second (the given x values are per
/// second, so `x_label` should say "thousand … / s"), y is p99 latency in µs on a log axis because it spans decades
/// between idle and overload. Points with zero, negative or non-finite values are skipped; a series left empty still
/// gets its legend entry, and no data at all gives an empty but labelled chart.
///
/// # Errors
///
/// When `path` does not end in `.png` or the file cannot be drawn.
pub fn throughput_latency_png(path: &Path, title: &str, x_label: &str, series: &[Series]) -> Result<(), Error> {
    check_png_path(path)?;
    ensure_font()?;
    let curves: Vec<(&str, Vec<(f64, f64)>)> =
        series.iter().map(|s| (s.name.as_str(), usable_points(&s.points))).collect();
    let all = curves.iter().flat_map(|(_, p)| p.iter());
    let x_max = all.clone().map(|p| p.0).fold(0.0, f64::max);
    let (y_min, y_max) = all.fold((f64::INFINITY, 0.0f64), |(lo, hi), p| (lo.min(p.1), hi.max(p.1)));
    let x_end = if x_max > 0.0 { x_max * 1.08 } else { 1.0 };
    let (y_lo, y_hi) = if y_max > 0.0 { decade_range(y_min, y_max) } else { (1.0, 1000.0) };

    let err = draw_err(path);
    let root = BitMapBackend::new(path, SIZE).into_drawing_area();
    root.fill(&WHITE).map_err(&err)?;
    let mut chart: LatencyChart = ChartBuilder::on(&root)
        .caption(title, (FONT, 28))
        .margin(20)
        .x_label_area_size(60)
        .y_label_area_size(80)
        .build_cartesian_2d(0f64..x_end, (y_lo..y_hi).log_scale())
        .map_err(&err)?;
    chart
        .configure_mesh()
        .x_desc(x_label)
        .y_desc("p99 latency (µs)")
        .label_style((FONT, 17))
        .axis_desc_style((FONT, 20))
        .y_label_formatter(&|v| tick_label(*v))
        .x_label_formatter(&|v| tick_label(*v))
        .x_max_light_lines(1)
        .bold_line_style(BLACK.mix(0.18))
        .light_line_style(BLACK.mix(0.06))
        .draw()
        .map_err(&err)?;

    for (i, (name, points)) in curves.into_iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        let marker = Marker::nth(i);
        chart.draw_series(LineSeries::new(points.iter().copied(), color.stroke_width(2))).map_err(&err)?;
        chart
            .draw_series(points.iter().map(|&p| EmptyElement::at(p) + Polygon::new(marker.outline(), color.filled())))
            .map_err(&err)?
            .label(name)
            .legend(move |(x, y)| {
                EmptyElement::at((x, y))
                    + PathElement::new([(-12, 0), (12, 0)], color.stroke_width(2))
                    + Polygon::new(marker.outline(), color.filled())
            });
    }
    if !series.is_empty() {
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .margin(12)
            .legend_area_size(34)
            .label_font((FONT, 18))
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK.mix(0.4))
            .draw()
            .map_err(&err)?;
    }
    Ok(root.present().map_err(&err)?)
}

/// Axes for bars in `n` slots (x from -0.5 to n - 0.5) up to `y_end`, titled `title` at the given size. No x ticks:
/// plotters would put them at "nice" fractions; callers write names under the slots instead.
fn bar_axes<'a>(
    root: &DrawingArea<BitMapBackend<'a>, plotters::coord::Shift>,
    path: &Path,
    (title, title_size): (&str, u32),
    y_label: &str,
    n: f64,
    y_end: f64,
) -> Result<ChartContext<'a, BitMapBackend<'a>, Cartesian2d<RangedCoordf64, RangedCoordf64>>, String> {
    let err = draw_err(path);
    let mut chart = ChartBuilder::on(root)
        .caption(title, (FONT, title_size))
        .margin(20)
        .x_label_area_size(50)
        .y_label_area_size(80)
        .build_cartesian_2d(-0.5..n - 0.5, 0f64..y_end)
        .map_err(&err)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(0)
        .y_desc(y_label)
        .label_style((FONT, 17))
        .axis_desc_style((FONT, 20))
        .y_label_formatter(&|v| tick_label(*v))
        .y_max_light_lines(1)
        .bold_line_style(BLACK.mix(0.18))
        .light_line_style(BLACK.mix(0.06))
        .draw()
        .map_err(&err)?;
    Ok(chart)
}

/// Draws one bar per system with its maximum achieved load, in thousands per second (values are per second, as for
/// [`throughput_latency_png`]), each bar annotated with its value. Non-finite or negative values draw as empty slots
/// labelled "n/a" rather than failing, so one broken run does not hide the others.
///
/// # Errors
///
/// When `path` does not end in `.png` or the file cannot be drawn.
pub fn max_throughput_bars_png(path: &Path, title: &str, y_label: &str, bars: &[(String, f64)]) -> Result<(), Error> {
    check_png_path(path)?;
    ensure_font()?;
    let values: Vec<Option<f64>> =
        bars.iter().map(|(_, v)| (v.is_finite() && *v >= 0.0).then_some(v / 1000.0)).collect();
    let y_max = values.iter().flatten().copied().fold(0.0, f64::max);
    let y_end = if y_max > 0.0 { y_max * 1.15 } else { 1.0 };
    let n = bars.len().max(1) as f64;

    let err = draw_err(path);
    let root = BitMapBackend::new(path, SIZE).into_drawing_area();
    root.fill(&WHITE).map_err(&err)?;
    let mut chart = bar_axes(&root, path, (title, 28), y_label, n, y_end)?;

    let above = TextStyle::from((FONT, 18)).color(&BLACK).pos(Pos::new(HPos::Center, VPos::Bottom));
    let below = TextStyle::from((FONT, 18)).color(&BLACK).pos(Pos::new(HPos::Center, VPos::Top));
    for (i, ((name, _), value)) in bars.iter().zip(&values).enumerate() {
        let x = i as f64;
        let color = COLORS[i % COLORS.len()];
        let (label, top) = match value {
            Some(v) => {
                chart.draw_series([Rectangle::new([(x - 0.3, 0.0), (x + 0.3, *v)], color.filled())]).map_err(&err)?;
                (tick_label((v * 10.0).round() / 10.0), *v)
            }
            None => ("n/a".to_string(), 0.0),
        };
        let (px, py) = chart.backend_coord(&(x, top));
        root.draw(&Text::new(label, (px, py - 4), above.clone())).map_err(&err)?;
        let (px, py) = chart.backend_coord(&(x, 0.0));
        root.draw(&Text::new(name.as_str(), (px, py + 10), below.clone())).map_err(&err)?;
    }
    Ok(root.present().map_err(&err)?)
}

/// Grouped bars (the paper's Figure 11): one group per entry of `groups` (e.g. a step of request handling), one bar
/// per series in each (e.g. a system, in its colour, named in the legend). `series[i].1[g]` is series `i`'s value in
/// group `g`; non-finite or missing values leave an empty slot.
///
/// # Errors
///
/// When `path` does not end in `.png` or the file cannot be drawn.
pub fn grouped_bars_png(
    path: &Path,
    title: &str,
    y_label: &str,
    groups: &[String],
    series: &[(String, Vec<f64>)],
) -> Result<(), Error> {
    check_png_path(path)?;
    ensure_font()?;
    let value = |s: &(String, Vec<f64>), g: usize| s.1.get(g).copied().filter(|v| v.is_finite() && *v >= 0.0);
    let y_max = series.iter().flat_map(|s| (0..groups.len()).filter_map(|g| value(s, g))).fold(0.0, f64::max);
    let y_end = if y_max > 0.0 { y_max * 1.15 } else { 1.0 };
    let n = groups.len().max(1) as f64;
    let width = 0.8 / series.len().max(1) as f64;

    let err = draw_err(path);
    let root = BitMapBackend::new(path, SIZE).into_drawing_area();
    root.fill(&WHITE).map_err(&err)?;
    let mut chart = bar_axes(&root, path, (title, 24), y_label, n, y_end)?;
    for (i, s) in series.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        let left = |g: usize| g as f64 - 0.4 + i as f64 * width;
        chart
            .draw_series((0..groups.len()).filter_map(|g| {
                value(s, g).map(|v| Rectangle::new([(left(g), 0.0), (left(g) + width * 0.9, v)], color.filled()))
            }))
            .map_err(&err)?
            .label(s.0.as_str())
            .legend(move |(x, y)| Rectangle::new([(x, y - 6), (x + 14, y + 6)], color.filled()));
    }
    let below = TextStyle::from((FONT, 18)).color(&BLACK).pos(Pos::new(HPos::Center, VPos::Top));
    for (g, name) in groups.iter().enumerate() {
        let (px, py) = chart.backend_coord(&(g as f64, 0.0));
        root.draw(&Text::new(name.as_str(), (px, py + 10), below.clone())).map_err(&err)?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .label_font((FONT, 18))
        .background_style(WHITE.mix(0.9))
        .border_style(BLACK.mix(0.3))
        .draw()
        .map_err(&err)?;
    Ok(root.present().map_err(&err)?)
}

/// A grid of ratios (the paper's Figure 5): one cell per (row, column), coloured blue above 1 and orange below
/// (white at 1; full colour at 2x either way), its value written in it; `None` cells are grey and say "n/a".
/// `cells[row][column]`; rows are drawn bottom-up, as a y axis.
///
/// # Errors
///
/// When `path` does not end in `.png` or the file cannot be drawn.
pub fn ratio_heatmap_png(
    path: &Path,
    title: &str,
    (x_label, x_ticks): (&str, &[String]),
    (y_label, y_ticks): (&str, &[String]),
    cells: &[Vec<Option<f64>>],
) -> Result<(), Error> {
    check_png_path(path)?;
    ensure_font()?;
    let (nx, ny) = (x_ticks.len().max(1), y_ticks.len().max(1));
    let err = draw_err(path);
    let root = BitMapBackend::new(path, SIZE).into_drawing_area();
    root.fill(&WHITE).map_err(&err)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, (FONT, 24))
        .margin(20)
        .x_label_area_size(60)
        .y_label_area_size(80)
        .build_cartesian_2d(0f64..nx as f64, 0f64..ny as f64)
        .map_err(&err)?;
    chart
        .configure_mesh()
        .disable_mesh()
        .x_labels(0)
        .y_labels(0)
        .x_desc(x_label)
        .y_desc(y_label)
        .axis_desc_style((FONT, 20))
        .draw()
        .map_err(&err)?;
    let centre = TextStyle::from((FONT, 15)).color(&BLACK).pos(Pos::new(HPos::Center, VPos::Center));
    let below = TextStyle::from((FONT, 15)).color(&BLACK).pos(Pos::new(HPos::Center, VPos::Top));
    let left = TextStyle::from((FONT, 15)).color(&BLACK).pos(Pos::new(HPos::Right, VPos::Center));
    for (row, values) in cells.iter().enumerate().take(ny) {
        for (col, value) in values.iter().enumerate().take(nx) {
            let (x, y) = (col as f64, row as f64);
            let color = match value {
                Some(r) if r.is_finite() && *r > 0.0 => ratio_color(*r),
                _ => RGBColor(200, 200, 200),
            };
            chart.draw_series([Rectangle::new([(x, y), (x + 1.0, y + 1.0)], color.filled())]).map_err(&err)?;
            chart.draw_series([Rectangle::new([(x, y), (x + 1.0, y + 1.0)], WHITE.stroke_width(1))]).map_err(&err)?;
            let text = value.filter(|r| r.is_finite()).map_or("n/a".to_owned(), |r| format!("{r:.2}"));
            let (px, py) = chart.backend_coord(&(x + 0.5, y + 0.5));
            root.draw(&Text::new(text, (px, py), centre.clone())).map_err(&err)?;
        }
    }
    for (col, tick) in x_ticks.iter().enumerate() {
        let (px, py) = chart.backend_coord(&(col as f64 + 0.5, 0.0));
        root.draw(&Text::new(tick.as_str(), (px, py + 6), below.clone())).map_err(&err)?;
    }
    for (row, tick) in y_ticks.iter().enumerate() {
        let (px, py) = chart.backend_coord(&(0.0, row as f64 + 0.5));
        root.draw(&Text::new(tick.as_str(), (px - 8, py), left.clone())).map_err(&err)?;
    }
    Ok(root.present().map_err(&err)?)
}

/// White at 1, blue towards 2 and above, orange towards 1/2 and below (log scale).
fn ratio_color(ratio: f64) -> RGBColor {
    let t = ratio.log2().clamp(-1.0, 1.0);
    let (target, t) = if t >= 0.0 { (COLORS[0], t) } else { (COLORS[1], -t) };
    let mix = |c: u8| (255.0 + (f64::from(c) - 255.0) * t * 0.85).round() as u8;
    RGBColor(mix(target.0), mix(target.1), mix(target.2))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    const PNG_SIGNATURE: [u8; 8] = [0x89, b'P', b'N', b'G', b'\r', b'\n', 0x1a, b'\n'];

    /// A fresh path in the temp dir; unique per process and test so parallel tests and runs don't collide.
    fn temp_png(name: &str) -> PathBuf {
        std::env::temp_dir().join(format!("cf-plot-{}-{name}.png", std::process::id()))
    }

    /// Reads and removes the file, checking it is a PNG of plausible size for a 1000x620 chart.
    fn assert_png(path: &Path) {
        let bytes = std::fs::read(path).expect("plot file written");
        std::fs::remove_file(path).ok();
        assert!(bytes.starts_with(&PNG_SIGNATURE), "not a PNG");
        assert!(bytes.len() > 5_000 && bytes.len() < 5_000_000, "odd PNG size {}", bytes.len());
    }

    #[test]
    fn draws_grouped_bars_with_missing_values() {
        let path = temp_png("grouped");
        let groups: Vec<String> = ["deserialize", "store", "send"].iter().map(|s| s.to_string()).collect();
        let series = vec![("a".to_string(), vec![100.0, 2000.0, 50.0]), ("b".to_string(), vec![f64::NAN, 1500.0])];
        grouped_bars_png(&path, "per step", "instructions", &groups, &series).unwrap();
        assert_png(&path);
    }

    #[test]
    fn draws_a_ratio_heatmap_with_missing_cells() {
        let path = temp_png("heatmap");
        let ticks = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let cells = vec![vec![Some(0.5), Some(1.0), None], vec![Some(1.7), Some(f64::NAN), Some(3.0)]];
        ratio_heatmap_png(
            &path,
            "sg / copy",
            ("total size", &ticks(&["64 B", "1 KiB", "64 KiB"])),
            ("entries", &ticks(&["1", "2"])),
            &cells,
        )
        .unwrap();
        assert_png(&path);
        assert_eq!(ratio_color(1.0), RGBColor(255, 255, 255));
        assert_ne!(ratio_color(2.0), ratio_color(0.5));
    }

    fn example_series() -> Vec<Series> {
        let curve = |name: &str, cap: f64, base: f64| Series {
            name: name.to_string(),
            points: (1..=12)
                .map(|i| {
                    let load = cap * f64::from(i) / 11.0;
                    let achieved = load.min(cap);
                    let rho = (load / cap).min(0.999);
                    (achieved, base / (1.0 - rho) + if load > cap { base * 200.0 } else { 0.0 })
                })
                .collect(),
        };
        vec![
            curve("Cornflakes", 1_200_000.0, 12.0),
            curve("Protobuf", 800_000.0, 15.0),
            curve("Cap'n Proto", 900_000.0, 14.0),
            curve("FlatBuffers", 950_000.0, 13.0),
        ]
    }

    #[test]
    fn draws_curves() {
        let path = temp_png("curves");
        throughput_latency_png(&path, "KV store, YCSB-C", "Achieved load (thousand requests / s)", &example_series())
            .unwrap();
        assert_png(&path);
    }

    #[test]
    fn draws_bars() {
        let path = temp_png("bars");
        let bars = vec![
            ("Cornflakes".to_string(), 1_200_000.0),
            ("Protobuf".to_string(), 800_000.0),
            ("broken".to_string(), f64::NAN),
        ];
        max_throughput_bars_png(&path, "Max throughput", "Achieved load (thousand requests / s)", &bars).unwrap();
        assert_png(&path);
    }

    #[test]
    fn empty_and_degenerate_inputs_do_not_panic() {
        let path = temp_png("empty");
        throughput_latency_png(&path, "empty", "x", &[]).unwrap();
        assert_png(&path);

        let odd = vec![
            Series { name: "nothing".into(), points: vec![] },
            Series { name: "single".into(), points: vec![(50_000.0, 20.0)] },
            Series {
                name: "junk".into(),
                points: vec![(0.0, 10.0), (f64::NAN, 5.0), (1000.0, 0.0), (2000.0, f64::INFINITY), (-1.0, 3.0)],
            },
        ];
        let path = temp_png("odd");
        throughput_latency_png(&path, "odd", "x", &odd).unwrap();
        assert_png(&path);

        let only_junk = vec![Series { name: "junk".into(), points: vec![(0.0, 0.0), (f64::NAN, f64::NAN)] }];
        let path = temp_png("junk");
        throughput_latency_png(&path, "junk", "x", &only_junk).unwrap();
        assert_png(&path);

        let path = temp_png("nobars");
        max_throughput_bars_png(&path, "none", "y", &[]).unwrap();
        assert_png(&path);

        let path = temp_png("zerobars");
        max_throughput_bars_png(&path, "zero", "y", &[("a".into(), 0.0), ("b".into(), -3.0)]).unwrap();
        assert_png(&path);
    }

    #[test]
    fn rejects_non_png_path_and_unwritable_dir() {
        let err = throughput_latency_png(Path::new("/tmp/x.jpg"), "t", "x", &[]).unwrap_err();
        assert!(err.to_string().contains(".png"), "{err}");
        let missing = std::env::temp_dir().join(format!("cf-plot-missing-{}", std::process::id())).join("a.png");
        assert!(throughput_latency_png(&missing, "t", "x", &example_series()).is_err());
    }

    #[test]
    fn tick_labels_are_clean() {
        assert_eq!(tick_label(1000.0000001), "1000");
        assert_eq!(tick_label(0.5), "0.5");
        assert_eq!(tick_label(2.5), "2.5");
        assert_eq!(tick_label(0.0), "0");
        assert_eq!(tick_label(1e7), "1e7");
        assert_eq!(decade_range(12.0, 3000.0), (10.0, 10_000.0));
        assert_eq!(decade_range(20.0, 20.0), (10.0, 100.0));
    }

    /// Writes the example chart for a person to look at: `CF_PLOT_EXAMPLE=/tmp/x.png cargo test -p cf example`.
    #[test]
    fn example_for_eyes() {
        let Some(dir) = std::env::var_os("CF_PLOT_EXAMPLE") else { return };
        let path = PathBuf::from(dir);
        throughput_latency_png(&path, "KV store, YCSB-C", "Achieved load (thousand requests / s)", &example_series())
            .unwrap();
        let bars: Vec<(String, f64)> = example_series()
            .iter()
            .map(|s| (s.name.clone(), s.points.iter().map(|p| p.0).fold(0.0, f64::max)))
            .collect();
        max_throughput_bars_png(
            &path.with_file_name("example-bars.png"),
            "KV store, YCSB-C: max achieved load",
            "thousand requests / s",
            &bars,
        )
        .unwrap();
    }
}
