//! A tiny software rasterizer for the simulators' RGB frames.
//!
//! Coordinates are in pixels with `x` to the right and `y` downwards; pixel
//! `(col, row)` covers `[col, col + 1) × [row, row + 1)` and is painted when
//! its centre `(col + 0.5, row + 0.5)` lies inside a shape.

use crate::codec::{ArrayError, NdArray};

/// An RGB colour.
pub(crate) type Rgb = [u8; 3];

/// An RGB image being drawn, row-major, three bytes per pixel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Canvas {
    width: usize,
    height: usize,
    pixels: Vec<u8>,
}

impl Canvas {
    /// A canvas filled with `background`.
    pub fn new(width: usize, height: usize, background: Rgb) -> Canvas {
        let mut pixels = Vec::with_capacity(width * height * 3);
        for _ in 0..width * height {
            pixels.extend_from_slice(&background);
        }
        Canvas {
            width,
            height,
            pixels,
        }
    }

    /// The colour of pixel `(col, row)`.
    #[cfg(test)]
    pub fn pixel(&self, col: usize, row: usize) -> Rgb {
        let i = (row * self.width + col) * 3;
        [self.pixels[i], self.pixels[i + 1], self.pixels[i + 2]]
    }

    /// Paints every pixel whose centre lies in `[x0, x1] × [y0, y1]` and for
    /// which `inside(x, y)` holds.
    fn fill_where(
        &mut self,
        (x0, y0, x1, y1): (f64, f64, f64, f64),
        color: Rgb,
        inside: impl Fn(f64, f64) -> bool,
    ) {
        if !(x0.is_finite() && y0.is_finite() && x1.is_finite() && y1.is_finite()) {
            return;
        }
        // Pixel columns whose centre c + 0.5 lies in [x0, x1].
        let span = |lo: f64, hi: f64, n: usize| -> (usize, usize) {
            let first = (lo - 0.5).ceil().max(0.0);
            let last = (hi - 0.5).floor().min(n as f64 - 1.0);
            if last < first {
                (1, 0)
            } else {
                (first as usize, last as usize)
            }
        };
        let (c0, c1) = span(x0, x1, self.width);
        let (r0, r1) = span(y0, y1, self.height);
        for row in r0..=r1.min(self.height.saturating_sub(1)) {
            let y = row as f64 + 0.5;
            for col in c0..=c1.min(self.width.saturating_sub(1)) {
                let x = col as f64 + 0.5;
                if inside(x, y) {
                    let i = (row * self.width + col) * 3;
                    self.pixels[i..i + 3].copy_from_slice(&color);
                }
            }
        }
    }

    /// Fills the axis-aligned rectangle `[x0, x1] × [y0, y1]`.
    pub fn fill_rect(&mut self, x0: f64, y0: f64, x1: f64, y1: f64, color: Rgb) {
        self.fill_where((x0, y0, x1, y1), color, |_, _| true);
    }

    /// Fills the disk of radius `r` around `(cx, cy)`.
    pub fn fill_disk(&mut self, cx: f64, cy: f64, r: f64, color: Rgb) {
        let r2 = r * r;
        self.fill_where((cx - r, cy - r, cx + r, cy + r), color, |x, y| {
            (x - cx) * (x - cx) + (y - cy) * (y - cy) <= r2
        });
    }

    /// Fills a convex polygon given by its corners in either winding.
    pub fn fill_convex(&mut self, corners: &[(f64, f64)], color: Rgb) {
        if corners.len() < 3 {
            return;
        }
        let bbox = corners.iter().fold(
            (
                f64::INFINITY,
                f64::INFINITY,
                f64::NEG_INFINITY,
                f64::NEG_INFINITY,
            ),
            |(x0, y0, x1, y1), &(x, y)| (x0.min(x), y0.min(y), x1.max(x), y1.max(y)),
        );
        self.fill_where(bbox, color, |x, y| {
            let (mut pos, mut neg) = (false, false);
            for (i, &(ax, ay)) in corners.iter().enumerate() {
                let (bx, by) = corners[(i + 1) % corners.len()];
                let cross = (bx - ax) * (y - ay) - (by - ay) * (x - ax);
                pos |= cross > 0.0;
                neg |= cross < 0.0;
            }
            !(pos && neg)
        });
    }

    /// Paints the whole pixel row `row`.
    pub fn hline(&mut self, row: usize, color: Rgb) {
        if row < self.height {
            let start = row * self.width * 3;
            for px in self.pixels[start..start + self.width * 3].chunks_exact_mut(3) {
                px.copy_from_slice(&color);
            }
        }
    }

    /// Paints a frame `thickness` pixels wide along the image border.
    pub fn border(&mut self, thickness: usize, color: Rgb) {
        let t = thickness as f64;
        let (w, h) = (self.width as f64, self.height as f64);
        self.fill_rect(0.0, 0.0, w, t, color);
        self.fill_rect(0.0, h - t, w, h, color);
        self.fill_rect(0.0, 0.0, t, h, color);
        self.fill_rect(w - t, 0.0, w, h, color);
    }

    /// The image as a uint8 array of shape `(height, width, 3)`.
    pub fn into_array(self) -> Result<NdArray, ArrayError> {
        NdArray::from_shape_vec(vec![self.height, self.width, 3], self.pixels)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const W: Rgb = [255, 255, 255];
    const K: Rgb = [0, 0, 0];

    fn count(c: &Canvas, color: Rgb) -> usize {
        c.pixels.chunks_exact(3).filter(|p| *p == color).count()
    }

    #[test]
    fn rectangles_cover_the_pixels_whose_centres_they_contain() {
        let mut c = Canvas::new(10, 8, W);
        c.fill_rect(2.0, 1.0, 5.0, 3.0, K);
        assert_eq!(count(&c, K), 3 * 2);
        assert_eq!(c.pixel(2, 1), K);
        assert_eq!(c.pixel(4, 2), K);
        assert_eq!(c.pixel(5, 2), W);
        // Clipped at the border, never out of bounds.
        c.fill_rect(-5.0, -5.0, 100.0, 0.9, K);
        assert_eq!(c.pixel(9, 0), K);
        c.fill_rect(f64::NAN, 0.0, 1.0, 1.0, [1, 2, 3]);
        assert_eq!(count(&c, [1, 2, 3]), 0);
    }

    #[test]
    fn disks_and_polygons() {
        let mut c = Canvas::new(21, 21, W);
        c.fill_disk(10.5, 10.5, 5.0, K);
        // Area close to π r².
        let n = count(&c, K) as f64;
        assert!((n - std::f64::consts::PI * 25.0).abs() < 8.0, "{n}");
        assert_eq!(c.pixel(10, 10), K);
        assert_eq!(c.pixel(0, 0), W);

        // An axis-aligned square given as a polygon, in either winding.
        let mut c = Canvas::new(20, 20, W);
        let square = [(2.0, 2.0), (6.0, 2.0), (6.0, 5.0), (2.0, 5.0)];
        c.fill_convex(&square, K);
        assert_eq!(count(&c, K), 4 * 3);
        let mut reversed = square;
        reversed.reverse();
        let mut d = Canvas::new(20, 20, W);
        d.fill_convex(&reversed, K);
        assert_eq!(c, d);
        // A diamond (a square turned 45°) covers about its area.
        let mut c = Canvas::new(40, 40, W);
        c.fill_convex(&[(20.3, 5.3), (35.3, 20.3), (20.3, 35.3), (5.3, 20.3)], K);
        let n = count(&c, K) as f64;
        assert!((n - 450.0).abs() < 20.0, "{n}");
        assert_eq!(c.pixel(20, 20), K);
        assert_eq!(c.pixel(8, 8), W);
        // Degenerate polygons paint nothing.
        c.fill_convex(&[(0.0, 0.0), (5.0, 5.0)], [9, 9, 9]);
        assert_eq!(count(&c, [9, 9, 9]), 0);
    }

    #[test]
    fn lines_borders_and_the_array_layout() {
        let mut c = Canvas::new(4, 3, W);
        c.hline(1, K);
        c.hline(7, K);
        assert_eq!(count(&c, K), 4);
        let mut b = Canvas::new(5, 5, W);
        b.border(1, K);
        assert_eq!(count(&b, K), 16);
        assert_eq!(b.pixel(2, 2), W);
        let a = c.into_array().unwrap();
        assert_eq!(a.shape(), &[3, 4, 3]);
        let v: Vec<u8> = a.to_vec().unwrap();
        assert_eq!(&v[12..24], &[0; 12]);
        assert_eq!(&v[..12], &[255; 12]);
    }
}
