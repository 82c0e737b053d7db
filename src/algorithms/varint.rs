//! LEB128 varints: an unsigned integer in 7-bit groups, low first, the
//! high bit of each byte saying another follows. Small numbers take one
//! byte; the stored logs and leases are mostly small numbers.

pub fn put_varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

/// The varint at the start of `bytes` and its length; `None` if cut short
/// or past 64 bits.
pub fn get_varint(bytes: &[u8]) -> Option<(u64, usize)> {
    let mut value = 0u64;
    for (i, &byte) in bytes.iter().enumerate().take(10) {
        let bits = u64::from(byte & 0x7f);
        let shifted = bits.checked_shl(7 * i as u32)?;
        if shifted >> (7 * i as u32) != bits {
            return None;
        }
        value |= shifted;
        if byte < 0x80 {
            return Some((value, i + 1));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_round_trip() {
        for value in [0, 1, 127, 128, 300, u64::from(u32::MAX), u64::MAX] {
            let mut bytes = Vec::new();
            put_varint(&mut bytes, value);
            assert_eq!(get_varint(&bytes), Some((value, bytes.len())));
        }
        assert_eq!(get_varint(&[0x80]), None);
    }
}
