//! What this server reports itself as: a leaf, read by the handlers (INFO, HELLO) and the Lua
//! engine (`redis.REDIS_VERSION`) alike.

/// The Redis version this server reports (INFO, HELLO, Lua's `redis.REDIS_VERSION`).
/// RedisBloom's test-suite gates tests on `>= 7.99.99`, so it must look like Redis 8 (spec §10).
pub const REDIS_VERSION: &str = "8.0.0";
