//! Python's `repr(float)` for finite floats, as the JSON header writes them.

/// Formats a finite float exactly as Python's `repr(float)`: the shortest
/// round-trip digits, fixed notation when the decimal exponent is in
/// [-4, 16), otherwise `d.ddde+XX`. Always reads back as a float (`1.0`, never
/// `1`). Returns the number of bytes written.
pub(crate) fn python_float_repr(f: f64, out: &mut [u8; 32]) -> usize {
    let mut n = 0;
    let mut push = |b: u8, n: &mut usize| {
        out[*n] = b;
        *n += 1;
    };
    if f == 0.0 {
        let s: &[u8] = if f.is_sign_negative() {
            b"-0.0"
        } else {
            b"0.0"
        };
        out[..s.len()].copy_from_slice(s);
        return s.len();
    }
    let mut ryu_buf = ryu::Buffer::new();
    let text = ryu_buf.format_finite(f).as_bytes();
    // Split ryu's output into sign, digits and a decimal exponent.
    let (negative, text) = match text.first() {
        Some(b'-') => (true, &text[1..]),
        _ => (false, text),
    };
    let (mantissa, exp) = match text.iter().position(|&b| b == b'e') {
        Some(i) => {
            let e = std::str::from_utf8(&text[i + 1..])
                .ok()
                .and_then(|s| s.parse::<i32>().ok())
                .unwrap_or(0);
            (&text[..i], e)
        }
        None => (text, 0),
    };
    let mut digits = [0u8; 24];
    let mut nd = 0usize;
    let mut int_digits = 0i32;
    let mut seen_point = false;
    for &b in mantissa {
        if b == b'.' {
            seen_point = true;
            continue;
        }
        if nd == 0 && b == b'0' {
            // Leading zero: shifts the decimal point.
            if !seen_point {
                continue;
            }
            int_digits -= 1;
            continue;
        }
        if nd < digits.len() {
            digits[nd] = b;
            nd += 1;
        }
        if !seen_point {
            int_digits += 1;
        }
    }
    while nd > 1 && digits[nd - 1] == b'0' {
        nd -= 1;
    }
    let digits = &digits[..nd];
    // Decimal exponent of the first significant digit.
    let e = int_digits - 1 + exp;
    if negative {
        push(b'-', &mut n);
    }
    if (-4..16).contains(&e) {
        if e >= 0 {
            let int_len = (e + 1) as usize;
            for i in 0..int_len {
                push(*digits.get(i).unwrap_or(&b'0'), &mut n);
            }
            push(b'.', &mut n);
            if nd > int_len {
                for &d in &digits[int_len..] {
                    push(d, &mut n);
                }
            } else {
                push(b'0', &mut n);
            }
        } else {
            push(b'0', &mut n);
            push(b'.', &mut n);
            for _ in 0..(-e - 1) {
                push(b'0', &mut n);
            }
            for &d in digits {
                push(d, &mut n);
            }
        }
    } else {
        push(digits[0], &mut n);
        if nd > 1 {
            push(b'.', &mut n);
            for &d in &digits[1..] {
                push(d, &mut n);
            }
        }
        push(b'e', &mut n);
        push(if e < 0 { b'-' } else { b'+' }, &mut n);
        let a = e.unsigned_abs();
        if a >= 100 {
            push(b'0' + (a / 100) as u8, &mut n);
        }
        push(b'0' + ((a / 10) % 10) as u8, &mut n);
        push(b'0' + (a % 10) as u8, &mut n);
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    fn repr(f: f64) -> String {
        let mut buf = [0u8; 32];
        let n = python_float_repr(f, &mut buf);
        String::from_utf8(buf[..n].to_vec()).unwrap()
    }

    #[test]
    fn floats_match_python_repr() {
        let cases = [
            (1.0, "1.0"),
            (-1.0, "-1.0"),
            (0.0, "0.0"),
            (-0.0, "-0.0"),
            (0.1, "0.1"),
            (100.0, "100.0"),
            (1e15, "1000000000000000.0"),
            (1e16, "1e+16"),
            (1.5e16, "1.5e+16"),
            (1234567890123456.0, "1234567890123456.0"),
            (12345678901234567.0, "1.2345678901234568e+16"),
            (0.0001, "0.0001"),
            (0.00012, "0.00012"),
            (0.00001, "1e-05"),
            (1.5e-7, "1.5e-07"),
            (5e-324, "5e-324"),
            (1.7976931348623157e308, "1.7976931348623157e+308"),
            (0.1f32 as f64, "0.10000000149011612"),
            (123.456, "123.456"),
            (2.5, "2.5"),
            (1e100, "1e+100"),
            (3.0e-100, "3e-100"),
            (0.5, "0.5"),
            (10.0, "10.0"),
        ];
        for (f, s) in cases {
            assert_eq!(repr(f), s, "{f:e}");
        }
    }
}
