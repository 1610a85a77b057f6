//! Tile addressing and the cached tile itself.

use std::time::{Duration, Instant};

/// How long a cached tile is served before it is fetched again (seconds).
pub const TILE_TTL_SECS: u64 = 5400;

/// A tile's address: zoom level and column/row in the slippy-map scheme.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TileKey {
    pub z: u8,
    pub x: u32,
    pub y: u32,
}

impl TileKey {
    /// The key of the tile one zoom level up that contains this one.
    pub fn parent(&self) -> Option<TileKey> {
        if self.z == 0 {
            return None;
        }
        Some(TileKey { z: self.z - 1, x: self.x / 2, y: self.y / 2 })
    }
}

/// A tile's bytes and when they were fetched.
pub struct Tile {
    pub key: TileKey,
    pub bytes: Vec<u8>,
    pub fetched: Instant,
}

impl Tile {
    /// True once the tile is older than `TILE_TTL_SECS`.
    pub fn is_stale(&self) -> bool {
        self.fetched.elapsed() > Duration::from_secs(TILE_TTL_SECS)
    }
}
