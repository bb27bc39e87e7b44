//! The store's write-ahead log record: [`LsmOp`], a put or delete of byte
//! strings, logged on [`crate::log`] one batch per [`super::WriteBatch`].
//!
//! Encoding inside a log frame (little-endian):
//! `tag u8 (1 put, 2 delete) | key_len u32 | value_len u32 | key | value`
//! (`value_len` is 0 for a delete). See `docs/format/lsm.md`.

use crate::format::bytes::get_u32;
use crate::log::LogRecord;

/// Bytes of an op before its key and value: tag, key length, value length.
const OP_HEADER: usize = 9;

/// One write of a batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LsmOp {
    /// Insert or overwrite `key` with `value`.
    Put(Vec<u8>, Vec<u8>),
    /// Remove `key`.
    Delete(Vec<u8>),
}

impl LsmOp {
    /// The user key written.
    pub fn key(&self) -> &[u8] {
        match self {
            LsmOp::Put(k, _) | LsmOp::Delete(k) => k,
        }
    }

    /// The value written (`None` for a delete).
    pub fn value(&self) -> Option<&[u8]> {
        match self {
            LsmOp::Put(_, v) => Some(v),
            LsmOp::Delete(_) => None,
        }
    }

    /// Bytes of the op's encoding.
    pub fn encoded_len(&self) -> usize {
        OP_HEADER + self.key().len() + self.value().map_or(0, <[u8]>::len)
    }
}

impl LogRecord for LsmOp {
    const MIN_LEN: usize = OP_HEADER;

    fn encode(&self, out: &mut Vec<u8>) {
        let (tag, k, v): (u8, &[u8], &[u8]) = match self {
            LsmOp::Put(k, v) => (1, k, v),
            LsmOp::Delete(k) => (2, k, &[]),
        };
        out.push(tag);
        // Keys and values are checked against the limits (64 KiB, 64 MiB)
        // before they are logged, so their lengths fit a u32.
        out.extend_from_slice(&(k.len() as u32).to_le_bytes());
        out.extend_from_slice(&(v.len() as u32).to_le_bytes());
        out.extend_from_slice(k);
        out.extend_from_slice(v);
    }

    fn decode(bytes: &[u8]) -> std::result::Result<(Self, usize), String> {
        let tag = bytes.first().copied().ok_or("op cut")?;
        let (Some(klen), Some(vlen)) = (get_u32(bytes, 1), get_u32(bytes, 5)) else {
            return Err("op header cut".into());
        };
        let (klen, vlen) = (klen as usize, vlen as usize);
        if klen > crate::lsm::key::MAX_KEY_LEN || vlen > crate::lsm::key::MAX_VALUE_LEN {
            return Err(format!(
                "op of key {klen} and value {vlen} bytes exceeds the limits"
            ));
        }
        let kend = OP_HEADER + klen;
        let vend = kend + vlen;
        let (Some(k), Some(v)) = (bytes.get(OP_HEADER..kend), bytes.get(kend..vend)) else {
            return Err("op body cut".into());
        };
        match tag {
            1 => Ok((LsmOp::Put(k.to_vec(), v.to_vec()), vend)),
            2 if vlen == 0 => Ok((LsmOp::Delete(k.to_vec()), vend)),
            2 => Err("delete op with a value".into()),
            t => Err(format!("unknown op tag {t}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ops_round_trip_and_damage_is_an_error() {
        for op in [
            LsmOp::Put(b"key".to_vec(), b"value".to_vec()),
            LsmOp::Put(Vec::new(), Vec::new()),
            LsmOp::Delete(b"gone".to_vec()),
        ] {
            let mut out = Vec::new();
            op.encode(&mut out);
            assert_eq!(out.len(), op.encoded_len());
            out.extend_from_slice(b"trailing");
            let (back, used) = LsmOp::decode(&out).unwrap();
            assert_eq!((back, used), (op.clone(), op.encoded_len()));
            for cut in 0..op.encoded_len() {
                assert!(LsmOp::decode(&out[..cut]).is_err(), "cut at {cut}");
            }
        }
        let mut bad = Vec::new();
        LsmOp::Delete(b"k".to_vec()).encode(&mut bad);
        bad[0] = 7;
        assert!(LsmOp::decode(&bad).is_err());
        let mut huge = vec![1u8];
        huge.extend_from_slice(&u32::MAX.to_le_bytes());
        huge.extend_from_slice(&0u32.to_le_bytes());
        assert!(LsmOp::decode(&huge).is_err());
    }
}
