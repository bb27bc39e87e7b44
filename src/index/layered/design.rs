//! What a layered kind is: a named recipe ([`DesignFn`]) that turns sorted
//! keys into a [`Design`], a stack of layers. The recipes import these types
//! from here; the kind table (`kinds.rs`) imports the recipes.

use serde_json::Value;

use super::build::LayerBuild;
use super::keys::Keys;
use crate::Result;
use crate::index::{ParamDoc, Params};

/// A built design: the layers bottom-up and the number of models.
#[derive(Debug)]
pub struct Design {
    /// Layers, bottom (over the data) first.
    pub layers: Vec<LayerBuild>,
    /// Models/segments of the learned layers (None for non-learned designs).
    pub models: Option<u64>,
    /// What the recipe chose and measured (stored in the manifest).
    pub notes: Value,
}

/// Builds a design over sorted keys with `per_page` records per data page.
pub type DesignFn = fn(&Params, &[u64], usize, usize) -> Result<Design>;

/// A [`DesignFn`] that also reads its keys from a data run, in passes of
/// bounded memory ([`Keys`]); over the same keys it builds the same design.
pub type StreamDesignFn = fn(&Params, Keys<'_>, usize, usize) -> Result<Design>;

/// A named layered kind.
pub struct LayeredKind {
    /// Kind name.
    pub name: &'static str,
    /// One line for `strata list`.
    pub summary: &'static str,
    /// The recipe: (params, keys, records per page, page size) -> design.
    pub design: DesignFn,
    /// The recipe over keys streamed from the data run, for a build whose
    /// keys are not in memory. Without one, such a build reads the zone maps'
    /// page bounds only (the zone maps) or,
    /// for the other kinds, every key back into memory.
    pub stream: Option<StreamDesignFn>,
    /// The parameters the recipe reads (besides `fetch` and `page`, which
    /// every layered kind takes), for `strata list`.
    pub params: &'static [ParamDoc],
}

impl std::fmt::Debug for LayeredKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LayeredKind").field("name", &self.name).finish()
    }
}
