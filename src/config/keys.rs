//! The keys each table of a model or policy file accepts, read from the serde declarations
//! that parse them, so the reference (docs/reference.md) is tested against the parser and
//! cannot drift from it.

use serde::de::{self, Deserializer, Visitor};
use serde::Deserialize;
use std::fmt;

/// The field names of a struct deserialized with `#[derive(Deserialize)]`, in declaration
/// order. Panics when `T` is not a struct, which is a programming error.
pub fn fields_of<'de, T: Deserialize<'de>>() -> &'static [&'static str] {
    let mut fields = None;
    let _ = T::deserialize(Probe(&mut fields));
    fields.expect("fields_of is for structs with named fields")
}

/// A deserializer that records the field list serde hands it and stops.
struct Probe<'a>(&'a mut Option<&'static [&'static str]>);

#[derive(Debug)]
struct Stop;

impl fmt::Display for Stop {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("probe stops here")
    }
}

impl std::error::Error for Stop {}

impl de::Error for Stop {
    fn custom<M: fmt::Display>(_: M) -> Self {
        Stop
    }
}

impl<'de> Deserializer<'de> for Probe<'_> {
    type Error = Stop;

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        fields: &'static [&'static str],
        _visitor: V,
    ) -> Result<V::Value, Stop> {
        *self.0 = Some(fields);
        Err(Stop)
    }

    fn deserialize_any<V: Visitor<'de>>(self, _visitor: V) -> Result<V::Value, Stop> {
        Err(Stop)
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        option unit unit_struct newtype_struct seq tuple tuple_struct map enum identifier
        ignored_any
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Deserialize)]
    #[allow(dead_code)]
    struct Two {
        first: u8,
        #[serde(default)]
        second: Option<String>,
    }

    #[test]
    fn reads_the_declared_fields_in_order() {
        assert_eq!(fields_of::<Two>(), &["first", "second"]);
    }
}
