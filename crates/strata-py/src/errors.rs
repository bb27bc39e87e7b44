//! The exception tree that mirrors [`strata::Error`].
//!
//! ```text
//! StrataError                      every error strata raises
//! ├── IoError                      Error::Io            (.file, .errno)
//! ├── CorruptionError              Error::Corruption    (.file, .page, .detail),
//! │                                 Error::CorruptionAt  (.file, .offset, .detail)
//! │   ├── BadMagicError            Error::BadMagic      (.file, .expected, .found)
//! │   └── TruncatedError           Error::Truncated     (.file, .expected, .found)
//! ├── UnsupportedVersionError      Error::UnsupportedVersion (.file, .found, .supported)
//! ├── InvalidInputError            Error::InvalidInput
//! │   └── OutOfOrderError          Error::OutOfOrder    (.position, .previous, .got)
//! ├── UnsupportedError             Error::Unsupported
//! ├── NotFoundError                Error::NotFound
//! ├── InjectedError                Error::Injected
//! ├── LockedError                  Error::Locked        (.dir, .exclusive)
//! └── ConflictError                Error::Conflict      (another writer published first)
//! ```
//!
//! `CorruptionError` groups the variants for which `Error::is_corruption`
//! holds. The message is the Rust error's `Display` text; the fields of the
//! variant are attributes of the exception.

use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use pyo3::{BoundObject, PyErr, create_exception};

create_exception!(
    _strata,
    StrataError,
    PyException,
    "Base class of every error strata raises (strata::Error)."
);
create_exception!(
    _strata,
    IoError,
    StrataError,
    "An operating-system I/O error on a file (Error::Io)."
);
create_exception!(
    _strata,
    CorruptionError,
    StrataError,
    "A checksum or structural check failed (Error::Corruption); never a wrong answer."
);
create_exception!(
    _strata,
    BadMagicError,
    CorruptionError,
    "A file does not start with the expected magic number (Error::BadMagic)."
);
create_exception!(
    _strata,
    TruncatedError,
    CorruptionError,
    "A file is shorter or longer than its header says (Error::Truncated)."
);
create_exception!(
    _strata,
    UnsupportedVersionError,
    StrataError,
    "A file has a format version this build cannot read (Error::UnsupportedVersion)."
);
create_exception!(
    _strata,
    InvalidInputError,
    StrataError,
    "An argument or configuration value is invalid (Error::InvalidInput)."
);
create_exception!(
    _strata,
    OutOfOrderError,
    InvalidInputError,
    "Keys that must be strictly increasing are not (Error::OutOfOrder)."
);
create_exception!(
    _strata,
    UnsupportedError,
    StrataError,
    "The operation is not supported by this index kind (Error::Unsupported)."
);
create_exception!(
    _strata,
    NotFoundError,
    StrataError,
    "A key or object that must exist does not (Error::NotFound)."
);
create_exception!(
    _strata,
    InjectedError,
    StrataError,
    "An injected fault, from fault-injecting storage (Error::Injected)."
);

create_exception!(
    _strata,
    LockedError,
    StrataError,
    "The store or index directory is locked by another user, in this process or another (Error::Locked)."
);

create_exception!(
    _strata,
    ConflictError,
    StrataError,
    "Another writer changed the file first: a conditional put on an object store lost (Error::Conflict)."
);

/// Converts a strata error into the matching Python exception, with the
/// variant's fields as attributes.
pub fn to_py(e: strata::Error) -> PyErr {
    let msg = e.to_string();
    Python::attach(|py| {
        let (err, attrs): (PyErr, Vec<(&str, Py<PyAny>)>) = match e {
            strata::Error::Io { file, source } => {
                let errno = source.raw_os_error();
                (
                    IoError::new_err(msg),
                    vec![("file", to_obj(py, file)), ("errno", to_obj(py, errno))],
                )
            }
            strata::Error::Corruption { file, page, detail } => (
                CorruptionError::new_err(msg),
                vec![
                    ("file", to_obj(py, file)),
                    ("page", to_obj(py, page)),
                    ("detail", to_obj(py, detail)),
                ],
            ),
            strata::Error::CorruptionAt { file, offset, detail } => (
                CorruptionError::new_err(msg),
                vec![
                    ("file", to_obj(py, file)),
                    ("offset", to_obj(py, offset)),
                    ("detail", to_obj(py, detail)),
                ],
            ),
            strata::Error::BadMagic {
                file,
                expected,
                found,
            } => (
                BadMagicError::new_err(msg),
                vec![
                    ("file", to_obj(py, file)),
                    ("expected", to_obj(py, expected)),
                    ("found", to_obj(py, found)),
                ],
            ),
            strata::Error::Truncated {
                file,
                expected,
                found,
            } => (
                TruncatedError::new_err(msg),
                vec![
                    ("file", to_obj(py, file)),
                    ("expected", to_obj(py, expected)),
                    ("found", to_obj(py, found)),
                ],
            ),
            strata::Error::UnsupportedVersion {
                file,
                found,
                supported,
            } => (
                UnsupportedVersionError::new_err(msg),
                vec![
                    ("file", to_obj(py, file)),
                    ("found", to_obj(py, found)),
                    ("supported", to_obj(py, supported)),
                ],
            ),
            strata::Error::OutOfOrder {
                position,
                previous,
                got,
            } => (
                OutOfOrderError::new_err(msg),
                vec![
                    ("position", to_obj(py, position)),
                    ("previous", to_obj(py, previous)),
                    ("got", to_obj(py, got)),
                ],
            ),
            strata::Error::InvalidInput(_) => (InvalidInputError::new_err(msg), vec![]),
            strata::Error::Unsupported(_) => (UnsupportedError::new_err(msg), vec![]),
            strata::Error::NotFound(_) => (NotFoundError::new_err(msg), vec![]),
            strata::Error::Injected(_) => (InjectedError::new_err(msg), vec![]),
            strata::Error::Conflict(_) => (ConflictError::new_err(msg), vec![]),
            strata::Error::Locked { dir, exclusive } => (
                LockedError::new_err(msg),
                vec![("dir", to_obj(py, dir)), ("exclusive", to_obj(py, exclusive))],
            ),
            // `strata::Error` is non-exhaustive: a variant added later still
            // arrives as a StrataError with its message.
            _ => (StrataError::new_err(msg), vec![]),
        };
        let value = err.value(py);
        for (name, v) in attrs {
            // Setting an attribute on a fresh exception instance cannot fail
            // in practice; if it did, the exception without it is still right.
            let _ = value.setattr(name, v);
        }
        err
    })
}

fn to_obj<'py, T: IntoPyObject<'py>>(py: Python<'py>, v: T) -> Py<PyAny> {
    match v.into_pyobject(py) {
        Ok(o) => o.into_any().unbind(),
        Err(_) => py.None(),
    }
}

/// `Result` extension: `.py()?` maps a strata error to its exception.
pub trait IntoPyResult<T> {
    /// Maps the error with [`to_py`].
    fn py(self) -> PyResult<T>;
}

impl<T> IntoPyResult<T> for strata::Result<T> {
    fn py(self) -> PyResult<T> {
        self.map_err(to_py)
    }
}

/// The message of a caught panic's payload.
fn panic_message(payload: &(dyn std::any::Any + Send)) -> &str {
    if let Some(s) = payload.downcast_ref::<&str>() {
        s
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s
    } else {
        "(no message)"
    }
}

/// A panic caught at the boundary, as a [`StrataError`]: Python callers see
/// the package's exception tree, never `PanicException`.
pub fn panic_to_py(payload: &(dyn std::any::Any + Send)) -> PyErr {
    StrataError::new_err(format!(
        "internal error in strata (a bug; please report it): {}",
        panic_message(payload)
    ))
}

/// How every binding calls into strata: with the GIL released, a strata
/// error mapped to its exception ([`to_py`]) and a panic caught and raised
/// as [`StrataError`] ([`panic_to_py`]).
pub trait Detach {
    /// Runs `f` without the GIL; see the trait documentation.
    fn run_detached<T: Send>(self, f: impl FnOnce() -> strata::Result<T> + Send) -> PyResult<T>;
}

impl Detach for Python<'_> {
    fn run_detached<T: Send>(self, f: impl FnOnce() -> strata::Result<T> + Send) -> PyResult<T> {
        // A panic leaves nothing half-updated that Python could observe
        // through these bindings: every call either returns or raises.
        let r = self.detach(|| std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)));
        match r {
            Ok(r) => r.py(),
            Err(payload) => Err(panic_to_py(payload.as_ref())),
        }
    }
}

/// Adds the exception classes to the module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("StrataError", py.get_type::<StrataError>())?;
    m.add("IoError", py.get_type::<IoError>())?;
    m.add("CorruptionError", py.get_type::<CorruptionError>())?;
    m.add("BadMagicError", py.get_type::<BadMagicError>())?;
    m.add("TruncatedError", py.get_type::<TruncatedError>())?;
    m.add(
        "UnsupportedVersionError",
        py.get_type::<UnsupportedVersionError>(),
    )?;
    m.add("InvalidInputError", py.get_type::<InvalidInputError>())?;
    m.add("OutOfOrderError", py.get_type::<OutOfOrderError>())?;
    m.add("UnsupportedError", py.get_type::<UnsupportedError>())?;
    m.add("NotFoundError", py.get_type::<NotFoundError>())?;
    m.add("InjectedError", py.get_type::<InjectedError>())?;
    m.add("LockedError", py.get_type::<LockedError>())?;
    m.add("ConflictError", py.get_type::<ConflictError>())?;
    Ok(())
}
