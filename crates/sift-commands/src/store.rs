//! The keyspace as handlers see it ([`Store`]), and its typed lookups.

use crate::registry::{Data, DataType};

/// What a key holds, type-erased.
#[derive(Debug)]
pub enum Held<T> {
    /// No (live) key.
    Missing,
    /// A value of a registered data type.
    Data(T),
    /// Any other value (a string, or a type this layer does not know).
    Other,
}

/// What a typed lookup found.
#[derive(Debug, PartialEq, Eq)]
pub enum Lookup<T> {
    /// No (live) key.
    Missing,
    /// A value of the type asked for.
    Found(T),
    /// A value of another type: the handler answers WRONGTYPE (or what its spec says).
    WrongType,
}

impl<T> Lookup<T> {
    /// The value, if found.
    pub fn found(self) -> Option<T> {
        match self {
            Lookup::Found(v) => Some(v),
            _ => None,
        }
    }

    /// Is the key missing?
    pub fn is_missing(&self) -> bool {
        matches!(self, Lookup::Missing)
    }
}

/// The keyspace, as far as the commands of the registered families need it. The keys a handler
/// touches are the ones its [`crate::Command::keys`] declare, which the transport has locked
/// (sift-server) or opens (the module). Generic over types: the typed lookups on `dyn Store`
/// (`get`, `get_mut`, `insert`, `exists`) are built on these.
pub trait Store {
    /// What `key` holds, to read it: must not count as a change.
    fn read(&mut self, key: &[u8]) -> Held<&dyn Data>;
    /// What `key` holds, to change it in place (the store counts a change, opens the key for
    /// writing).
    fn write(&mut self, key: &[u8]) -> Held<&mut dyn Data>;
    /// What each of `keys` holds, to read them all at once (a merge reads its sources, then
    /// computes, then writes its destination). A key may appear twice.
    fn read_many<'s>(&'s mut self, keys: &[&[u8]]) -> Vec<Held<&'s dyn Data>>;
    /// Stores `value` at `key`, replacing whatever it held (of any type, and its time to live, as
    /// `SET` does): creation, and atomic replacement (every reader sees the old value or the new
    /// one). Returns the stored value.
    fn set(&mut self, key: &[u8], value: Box<dyn Data>) -> &mut dyn Data;
    /// Deletes `key`, whatever it holds (and its time to live), as `DEL` does; returns whether
    /// it held a (live) value. A deletion counts as a change. What a handler uses to take back a
    /// key it created itself when the command then fails, so that a refused command changes
    /// nothing.
    fn delete(&mut self, key: &[u8]) -> bool;
}

impl dyn Store + '_ {
    /// The `T` at `key`, to read it.
    pub fn get<T: DataType>(&mut self, key: &[u8]) -> Lookup<&T> {
        match self.read(key) {
            Held::Missing => Lookup::Missing,
            Held::Data(d) => d.downcast_ref().map_or(Lookup::WrongType, Lookup::Found),
            Held::Other => Lookup::WrongType,
        }
    }

    /// The `T` at `key`, to change it in place (counts as a change whatever it finds).
    pub fn get_mut<T: DataType>(&mut self, key: &[u8]) -> Lookup<&mut T> {
        match self.write(key) {
            Held::Missing => Lookup::Missing,
            Held::Data(d) => d.downcast_mut().map_or(Lookup::WrongType, Lookup::Found),
            Held::Other => Lookup::WrongType,
        }
    }

    /// Stores `value` at `key` (see [`Store::set`]) and returns it.
    pub fn insert<T: DataType>(&mut self, key: &[u8], value: T) -> &mut T {
        self.set(key, Box::new(value)).downcast_mut().expect("the value just stored is a T")
    }

    /// Does `key` hold anything (of any type)?
    pub fn exists(&mut self, key: &[u8]) -> bool {
        !matches!(self.read(key), Held::Missing)
    }
}
