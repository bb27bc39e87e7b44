//! Conversions between JSON values (stats, configs, bench records) and
//! Python objects.

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyString};
use serde_json::Value;

/// A JSON value as a Python object (dict, list, int, float, str, bool, None).
pub fn json_to_py<'py>(py: Python<'py>, v: &Value) -> PyResult<Bound<'py, PyAny>> {
    Ok(match v {
        Value::Null => py.None().into_bound(py),
        Value::Bool(b) => PyBool::new(py, *b).to_owned().into_any(),
        Value::Number(n) => {
            if let Some(u) = n.as_u64() {
                u.into_pyobject(py)?.into_any()
            } else if let Some(i) = n.as_i64() {
                i.into_pyobject(py)?.into_any()
            } else {
                n.as_f64().unwrap_or(f64::NAN).into_pyobject(py)?.into_any()
            }
        }
        Value::String(s) => PyString::new(py, s).into_any(),
        Value::Array(a) => {
            let items = a
                .iter()
                .map(|x| json_to_py(py, x))
                .collect::<PyResult<Vec<_>>>()?;
            PyList::new(py, items)?.into_any()
        }
        Value::Object(o) => {
            let d = PyDict::new(py);
            for (k, x) in o {
                d.set_item(k, json_to_py(py, x)?)?;
            }
            d.into_any()
        }
    })
}

/// A serialisable Rust value as a Python object, through JSON.
pub fn to_py_via_json<'py, T: serde::Serialize>(py: Python<'py>, v: &T) -> PyResult<Bound<'py, PyAny>> {
    let value = serde_json::to_value(v)
        .map_err(|e| crate::errors::InvalidInputError::new_err(format!("cannot convert to JSON: {e}")))?;
    json_to_py(py, &value)
}

/// An index parameter from Python: bool, int (>= 0 or negative), float or str.
pub fn py_to_param(name: &str, v: &Bound<'_, PyAny>) -> PyResult<Value> {
    if v.is_instance_of::<PyBool>() {
        return Ok(Value::Bool(v.extract()?));
    }
    if v.is_instance_of::<PyInt>() {
        if let Ok(u) = v.extract::<u64>() {
            return Ok(Value::from(u));
        }
        return Ok(Value::from(v.extract::<i64>()?));
    }
    if v.is_instance_of::<PyFloat>() {
        return Ok(Value::from(v.extract::<f64>()?));
    }
    if v.is_instance_of::<PyString>() {
        return Ok(Value::from(v.extract::<String>()?));
    }
    Err(PyTypeError::new_err(format!(
        "index parameter {name}= must be an int, float, bool or str, not {}",
        v.get_type().name()?
    )))
}
