//! The meter takes no settings; any key is a load error.

use serde::Deserialize;
use serde::Deserializer;
use serde_json::Map;
use serde_json::Value;

/// `TokenMeterConfig`: always empty.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TokenMeterConfig;

/// A key was given although the meter supports none.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("TokenMeterConfig: unknown key \"{0}\" (no settings are supported)")]
pub struct TokenMeterConfigError(pub String);

impl TokenMeterConfig {
    /// Validates a config value (`null` or an empty object).
    pub fn parse(value: &Value) -> Result<Self, TokenMeterConfigError> {
        match value {
            Value::Null => Ok(Self),
            Value::Object(map) => match map.keys().next() {
                Some(key) => Err(TokenMeterConfigError(key.clone())),
                None => Ok(Self),
            },
            other => Err(TokenMeterConfigError(other.to_string())),
        }
    }
}

impl serde::Serialize for TokenMeterConfig {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serde::ser::SerializeMap::end(serializer.serialize_map(Some(0))?)
    }
}

impl<'de> Deserialize<'de> for TokenMeterConfig {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let map = Option::<Map<String, Value>>::deserialize(deserializer)?;
        match map.as_ref().and_then(|m| m.keys().next()) {
            Some(key) => Err(serde::de::Error::custom(TokenMeterConfigError(key.clone()))),
            None => Ok(Self),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn any_key_fails_load() {
        // Checklist D43.
        assert_eq!(TokenMeterConfig::parse(&json!({})), Ok(TokenMeterConfig));
        assert_eq!(TokenMeterConfig::parse(&Value::Null), Ok(TokenMeterConfig));
        let error = TokenMeterConfig::parse(&json!({"window": 5})).unwrap_err();
        assert_eq!(
            error.to_string(),
            "TokenMeterConfig: unknown key \"window\" (no settings are supported)"
        );
        let error = serde_json::from_value::<TokenMeterConfig>(json!({"x": 1})).unwrap_err();
        assert!(error.to_string().contains("unknown key \"x\""), "{error}");
        assert!(serde_json::from_value::<TokenMeterConfig>(json!({})).is_ok());
    }
}
