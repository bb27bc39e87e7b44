//! Tests of the FITing-tree.
