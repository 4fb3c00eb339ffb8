//! Detects non-finite floats in a typed payload before it becomes JSON.
//!
//! `serde_json::to_value` silently turns NaN and ±Infinity into `null`, so a typed append would
//! store a different value than the caller handed in. The log must refuse such data (§1.3,
//! checklist item 2) instead, and the converted `Value` can no longer tell a lost float from a
//! real `null`; this probe walks the payload itself. It runs only when the converted value
//! contains a `null`, the sole trace a lost float can leave.

use std::fmt;

use serde::Serialize;
use serde::ser;

/// `true` if `value` holds a `null` anywhere (iterative: payload depth is unbounded).
pub(crate) fn contains_null(value: &serde_json::Value) -> bool {
    let mut stack = vec![value];
    while let Some(v) = stack.pop() {
        match v {
            serde_json::Value::Null => return true,
            serde_json::Value::Array(items) => stack.extend(items),
            serde_json::Value::Object(map) => stack.extend(map.values()),
            _ => {}
        }
    }
    false
}

/// `true` if serializing `value` would emit a NaN or infinite float anywhere.
pub(crate) fn has_non_finite<T: Serialize + ?Sized>(value: &T) -> bool {
    matches!(value.serialize(Probe), Err(Found::NonFinite))
}

#[derive(Debug)]
enum Found {
    NonFinite,
    /// Anything the payload's own `Serialize` reports; the real conversion reports it too.
    Other,
}

impl fmt::Display for Found {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("non-finite float")
    }
}

impl std::error::Error for Found {}

impl ser::Error for Found {
    fn custom<M: fmt::Display>(_: M) -> Self {
        Found::Other
    }
}

struct Probe;

fn float(v: f64) -> Result<(), Found> {
    if v.is_finite() {
        Ok(())
    } else {
        Err(Found::NonFinite)
    }
}

macro_rules! ignore {
    ($($name:ident($ty:ty)),* $(,)?) => {
        $(fn $name(self, _: $ty) -> Result<(), Found> { Ok(()) })*
    };
}

impl ser::Serializer for Probe {
    type Ok = ();
    type Error = Found;
    type SerializeSeq = Probe;
    type SerializeTuple = Probe;
    type SerializeTupleStruct = Probe;
    type SerializeTupleVariant = Probe;
    type SerializeMap = Probe;
    type SerializeStruct = Probe;
    type SerializeStructVariant = Probe;

    ignore!(
        serialize_bool(bool),
        serialize_i8(i8),
        serialize_i16(i16),
        serialize_i32(i32),
        serialize_i64(i64),
        serialize_i128(i128),
        serialize_u8(u8),
        serialize_u16(u16),
        serialize_u32(u32),
        serialize_u64(u64),
        serialize_u128(u128),
        serialize_char(char),
        serialize_str(&str),
        serialize_bytes(&[u8]),
        serialize_unit_struct(&'static str),
    );

    fn serialize_f32(self, v: f32) -> Result<(), Found> {
        float(f64::from(v))
    }
    fn serialize_f64(self, v: f64) -> Result<(), Found> {
        float(v)
    }
    fn serialize_none(self) -> Result<(), Found> {
        Ok(())
    }
    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result<(), Found> {
        value.serialize(Probe)
    }
    fn serialize_unit(self) -> Result<(), Found> {
        Ok(())
    }
    fn serialize_unit_variant(self, _: &'static str, _: u32, _: &'static str) -> Result<(), Found> {
        Ok(())
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        value: &T,
    ) -> Result<(), Found> {
        value.serialize(Probe)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        value: &T,
    ) -> Result<(), Found> {
        value.serialize(Probe)
    }
    fn serialize_seq(self, _: Option<usize>) -> Result<Probe, Found> {
        Ok(Probe)
    }
    fn serialize_tuple(self, _: usize) -> Result<Probe, Found> {
        Ok(Probe)
    }
    fn serialize_tuple_struct(self, _: &'static str, _: usize) -> Result<Probe, Found> {
        Ok(Probe)
    }
    fn serialize_tuple_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Probe, Found> {
        Ok(Probe)
    }
    fn serialize_map(self, _: Option<usize>) -> Result<Probe, Found> {
        Ok(Probe)
    }
    fn serialize_struct(self, _: &'static str, _: usize) -> Result<Probe, Found> {
        Ok(Probe)
    }
    fn serialize_struct_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Probe, Found> {
        Ok(Probe)
    }
}

macro_rules! compound {
    ($($trait:ident :: $method:ident),* $(,)?) => {
        $(impl ser::$trait for Probe {
            type Ok = ();
            type Error = Found;
            fn $method<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Found> {
                value.serialize(Probe)
            }
            fn end(self) -> Result<(), Found> {
                Ok(())
            }
        })*
    };
}

compound!(
    SerializeSeq::serialize_element,
    SerializeTuple::serialize_element,
    SerializeTupleStruct::serialize_field,
    SerializeTupleVariant::serialize_field,
);

impl ser::SerializeMap for Probe {
    type Ok = ();
    type Error = Found;
    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> Result<(), Found> {
        key.serialize(Probe)
    }
    fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Found> {
        value.serialize(Probe)
    }
    fn end(self) -> Result<(), Found> {
        Ok(())
    }
}

impl ser::SerializeStruct for Probe {
    type Ok = ();
    type Error = Found;
    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        _: &'static str,
        value: &T,
    ) -> Result<(), Found> {
        value.serialize(Probe)
    }
    fn end(self) -> Result<(), Found> {
        Ok(())
    }
}

impl ser::SerializeStructVariant for Probe {
    type Ok = ();
    type Error = Found;
    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        _: &'static str,
        value: &T,
    ) -> Result<(), Found> {
        value.serialize(Probe)
    }
    fn end(self) -> Result<(), Found> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Serialize)]
    struct Nested {
        plain: Vec<Option<f64>>,
        map: std::collections::BTreeMap<String, f32>,
    }

    #[test]
    fn finds_non_finite_floats_at_any_depth() {
        let ok = Nested {
            plain: vec![Some(1.5), None],
            map: [("a".to_owned(), 2.0)].into(),
        };
        assert!(!has_non_finite(&ok));
        let nan = Nested {
            plain: vec![None, Some(f64::NAN)],
            map: Default::default(),
        };
        assert!(has_non_finite(&nan));
        let inf = Nested {
            plain: vec![],
            map: [("b".to_owned(), f32::NEG_INFINITY)].into(),
        };
        assert!(has_non_finite(&inf));
        assert!(has_non_finite(&(1, [f64::INFINITY])));
    }
}
