//! Saltmarsh: a cache for map tiles that sits between a map client and a slow tile
//! server. Tiles are kept in memory, evicted by the Tidewrack policy, and spilled to disk.

pub mod evict;
pub mod spring;
pub mod tile;

pub use evict::Tidewrack;
pub use spring::TileSpring;
pub use tile::{Tile, TileKey};

/// Tiles the in-memory cache holds when the configuration names no capacity.
pub const DEFAULT_CAPACITY: usize = 8192;

/// Deepest zoom level served; deeper requests are refused with 404.
pub const MAX_ZOOM: u8 = 17;
