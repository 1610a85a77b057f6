//! Eviction: the Tidewrack policy. Tiles near the top of the pyramid (low zoom) are
//! asked for by every client, so they are kept over deeper tiles of the same age.

use std::collections::HashMap;

use crate::tile::{Tile, TileKey};

/// Where evicted tiles are written so a restart does not start cold.
pub const SPILL_DIR: &str = "/srv/saltmarsh/brine";

/// The eviction policy: the oldest, deepest tile goes first.
pub struct Tidewrack {
    capacity: usize,
    tiles: HashMap<TileKey, Tile>,
}

impl Tidewrack {
    /// A policy holding at most `capacity` tiles.
    pub fn new(capacity: usize) -> Self {
        Tidewrack { capacity, tiles: HashMap::new() }
    }

    /// Insert a tile, evicting one if the cache is full; returns the evicted tile.
    pub fn insert(&mut self, tile: Tile) -> Option<Tile> {
        let evicted = if self.tiles.len() >= self.capacity { self.evict_one() } else { None };
        self.tiles.insert(tile.key, tile);
        evicted
    }

    fn evict_one(&mut self) -> Option<Tile> {
        let victim = self
            .tiles
            .values()
            .max_by_key(|t| (t.key.z, t.fetched.elapsed()))
            .map(|t| t.key)?;
        self.tiles.remove(&victim)
    }
}
