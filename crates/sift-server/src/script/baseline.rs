//! The sandbox's baseline: what scripts share, as the VM was created, put back after each script.

use mlua::{Function, Lua, Table, Value};

/// The shared state of a fresh VM that scripts can reach and change: the globals table, and
/// for each table a script can get at (`_G`, `redis`, the libraries, the metatables of `_G`
/// and of strings) its entries and metatable.
pub(super) struct Baseline {
    pub(super) globals: Table,
    pub(super) tables: Vec<SharedTable>,
    /// A Lua function telling whether any of `tables` differs from its baseline (entries or
    /// metatable): the check after every script, ~100 raw reads inside the VM; the restore
    /// itself runs only when something changed.
    pub(super) changed: Function,
}

/// A table scripts share: the table, its entries and its metatable as the VM was created.
pub(super) type SharedTable = (Table, Vec<(Value, Value)>, Option<Table>);

/// The body of [`Baseline::changed`], given `{{table, entries, count, metatable}, ...}`. Only
/// locals: the script cannot reach or alter it.
const CHANGED: &str = r#"
local list = ...
local next, rawequal, getmetatable = next, rawequal, getmetatable
return function()
  -- Which metatables the tables have, then (the list starts with them) the metatables'
  -- contents: once they are known unchanged, no value compared below has an __eq the script
  -- could have planted (it would run here, without the time limit), so `~=` is safe.
  for i = 1, #list do
    local e = list[i]
    if not rawequal(getmetatable(e[1]), e[4]) then return true end
  end
  for i = 1, #list do
    local e = list[i]
    local t, base = e[1], e[2]
    local n = 0
    for k, v in next, t do
      if base[k] ~= v then return true end
      n = n + 1
    end
    if n ~= e[3] then return true end
  end
  return false
end
"#;

impl Baseline {
    pub(super) fn take(lua: &Lua) -> mlua::Result<Baseline> {
        let globals = lua.globals();
        // The metatables first: [`CHANGED`] relies on it.
        let mut list: Vec<Table> = globals.metatable().into_iter().collect();
        if let Value::Table(t) = lua.load("return getmetatable('')").set_name("=sift").eval::<Value>()? {
            list.push(t);
        }
        list.push(globals.clone());
        globals.for_each(|_: Value, v: Value| {
            if let Value::Table(t) = v {
                list.push(t);
            }
            Ok(())
        })?;
        let mut tables: Vec<SharedTable> = Vec::new();
        for t in list {
            if tables.iter().any(|(u, _, _)| u.to_pointer() == t.to_pointer()) {
                continue;
            }
            let mut entries = Vec::new();
            t.for_each(|k: Value, v: Value| {
                entries.push((k, v));
                Ok(())
            })?;
            let mt = t.metatable();
            tables.push((t, entries, mt));
        }
        let list = lua.create_table()?;
        for (i, (t, entries, mt)) in tables.iter().enumerate() {
            let base = lua.create_table()?;
            for (k, v) in entries {
                base.raw_set(k.clone(), v.clone())?;
            }
            let e = lua.create_sequence_from([
                Value::Table(t.clone()),
                Value::Table(base),
                Value::Integer(entries.len() as i64),
                mt.clone().map_or(Value::Nil, Value::Table),
            ])?;
            list.raw_set(i + 1, e)?;
        }
        let changed = lua.load(CHANGED).set_name("=sift").call::<Function>(list)?;
        Ok(Baseline { globals, tables, changed })
    }
}
