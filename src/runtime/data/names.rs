//! Interned ids: the name table a [`DecisionTrace`](super::DecisionTrace) keeps, so that
//! its items name nodes, supervisors, subgraphs, reasons and candidate lists by index
//! (a `u32`, copied freely) instead of by shared `Arc<str>` (a reference count changed
//! with a locked instruction when an item is recorded, and again when it is dropped:
//! ADR 0051, ADR 0055).
//!
//! One text has one [`Name`] in a table, whichever allocation it came from, so two
//! names are equal exactly when their texts are. The table keeps every text it was
//! given (nothing is removed), so an id interned by its allocation (the plan's shared
//! ids, looked up by address first) cannot be mistaken for another text while the table
//! lives.

use std::num::NonZeroU32;
use std::sync::Arc;

use super::candidates::Candidates;

/// An interned id: a text's index (plus one) in a trace's [`Names`]. Read it with
/// [`Names::get`], or through an [`ItemRef`](super::ItemRef)'s accessors.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Name(NonZeroU32);

/// An interned candidate list: a non-empty [`Candidates`]' index (plus one) in a
/// trace's [`Names`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ListName(NonZeroU32);

/// Slots of the by-address cache: a loop step names a handful of the plan's ids, each
/// found here in a few instructions.
const RECENT: usize = 64;

/// The most other allocations of known texts a table keeps (see `Names::aliases`).
const MAX_ALIASES: usize = 1024;

/// The name table of one trace: every text its items name, once each, and the
/// candidate lists they hold.
#[derive(Clone)]
pub struct Names {
    texts: Vec<Arc<str>>,
    by_text: foldhash::HashMap<Arc<str>, Name>,
    /// Allocation address -> name, for the allocations in `texts` and `aliases` (so an
    /// address here is never reused while the table lives).
    by_addr: foldhash::HashMap<usize, Name>,
    /// Other allocations of known texts, kept so that they too are found by address (a
    /// plan holds some ids twice: a rule entry's and its node's). At most
    /// [`MAX_ALIASES`]; past that, further ones are found by text.
    aliases: Vec<Arc<str>>,
    /// A direct-mapped cache in front of `by_addr`: (address, name).
    recent: [(usize, Option<Name>); RECENT],
    lists: Vec<Candidates>,
    /// List allocation address -> list, for the lists in `lists`.
    lists_by_addr: foldhash::HashMap<usize, ListName>,
    recent_list: (usize, Option<ListName>),
}

impl Default for Names {
    fn default() -> Self {
        Self {
            texts: Vec::new(),
            by_text: Default::default(),
            by_addr: Default::default(),
            aliases: Vec::new(),
            recent: [(0, None); RECENT],
            lists: Vec::new(),
            lists_by_addr: Default::default(),
            recent_list: (0, None),
        }
    }
}

impl std::fmt::Debug for Names {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Names")
            .field("texts", &self.texts)
            .field("lists", &self.lists)
            .finish_non_exhaustive()
    }
}

fn addr_of(text: &Arc<str>) -> usize {
    Arc::as_ptr(text).cast::<u8>() as usize
}

/// The cache slot of an address: Fibonacci hashing (allocations a few bytes apart land
/// in unrelated slots).
#[inline(always)]
fn slot_of(addr: usize) -> usize {
    (addr as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) as usize >> (usize::BITS - 6)
}

/// The second cache slot of an address (another multiplier): two ids whose first slots
/// collide each keep a place, instead of evicting each other on every step (the slow
/// path's hashed look-up, about 40 instructions an id, ADR 0064).
#[inline(always)]
fn second_slot_of(addr: usize) -> usize {
    (addr as u64).wrapping_mul(0xC2B2_AE3D_27D4_EB4F) as usize >> (usize::BITS - 6)
}

fn index(n: NonZeroU32) -> usize {
    // A table never holds more than `u32::MAX - 1` texts (see `next_name`).
    (n.get() - 1) as usize
}

/// The name of the entry `len` of a table (its index plus one).
fn next_name(len: usize) -> NonZeroU32 {
    u32::try_from(len)
        .ok()
        .and_then(|n| n.checked_add(1))
        .and_then(NonZeroU32::new)
        .expect("a trace names fewer than 4 billion distinct texts")
}

impl Names {
    /// The text of `name`.
    ///
    /// # Panics
    /// When `name` is not from this table (names are only handed out by the trace that
    /// holds them, so this is a bug in the caller).
    pub fn get(&self, name: Name) -> &str {
        &self.texts[index(name.0)]
    }

    /// The shared text of `name` (what [`ItemRef::to_item`](super::ItemRef::to_item)
    /// copies: a count, not an allocation).
    pub(crate) fn shared(&self, name: Name) -> &Arc<str> {
        &self.texts[index(name.0)]
    }

    /// The candidate list `list`.
    ///
    /// # Panics
    /// When `list` is not from this table.
    pub fn list(&self, list: ListName) -> &Candidates {
        &self.lists[index(list.0)]
    }

    /// The number of distinct texts.
    pub fn len(&self) -> usize {
        self.texts.len()
    }

    /// True when no text is held.
    pub fn is_empty(&self) -> bool {
        self.texts.is_empty()
    }

    /// The name of a shared text: found by its allocation's address when the table holds
    /// that allocation (a plan's id: no hashing of the text, no reference count), else by
    /// its text, else added.
    #[inline(always)]
    pub fn intern_arc(&mut self, text: &Arc<str>) -> Name {
        let addr = addr_of(text);
        let (at, name) = self.recent[slot_of(addr)];
        if at == addr
            && let Some(name) = name
        {
            return name;
        }
        self.intern_arc_slow(text, addr)
    }

    #[inline(never)]
    fn intern_arc_slow(&mut self, text: &Arc<str>, addr: usize) -> Name {
        if let (at, Some(name)) = self.recent[second_slot_of(addr)]
            && at == addr
        {
            return name;
        }
        if let Some(&name) = self.by_addr.get(&addr) {
            self.remember(addr, name);
            return name;
        }
        if let Some(&name) = self.by_text.get(&**text) {
            // Another allocation of a known text: kept (up to a bound) so that it is found
            // by address next time.
            if self.aliases.len() < MAX_ALIASES {
                self.aliases.push(Arc::clone(text));
                self.by_addr.insert(addr, name);
                self.remember(addr, name);
            }
            return name;
        }
        let name = self.push(Arc::clone(text));
        self.by_addr.insert(addr, name);
        self.remember(addr, name);
        name
    }

    /// Caches `addr`'s name: in its first slot when that is free or its own, else in its
    /// second (so two ids whose first slots collide are both found without hashing).
    fn remember(&mut self, addr: usize, name: Name) {
        let first = slot_of(addr);
        let slot = match self.recent[first] {
            (0, _) => first,
            (at, _) if at == addr => first,
            _ => second_slot_of(addr),
        };
        self.recent[slot] = (addr, Some(name));
    }

    /// The name of `text`, added when new.
    pub fn intern(&mut self, text: &str) -> Name {
        match self.by_text.get(text) {
            Some(&name) => name,
            None => self.push(Arc::from(text)),
        }
    }

    /// The name of an owned text, added (without copying it) when new.
    pub fn intern_owned(&mut self, text: Arc<str>) -> Name {
        match self.by_text.get(&*text) {
            Some(&name) => name,
            None => self.push(text),
        }
    }

    fn push(&mut self, text: Arc<str>) -> Name {
        let name = Name(next_name(self.texts.len()));
        self.by_text.insert(Arc::clone(&text), name);
        self.texts.push(text);
        name
    }

    /// The interned form of a candidate list (`None` for an empty one): a shared list is
    /// found by its allocation's address, so a rule table's lone winner's list is held
    /// once however many decisions name it.
    #[inline(always)]
    pub fn intern_list(&mut self, list: &Candidates) -> Option<ListName> {
        let addr = list.addr()?;
        if let (at, Some(name)) = self.recent_list
            && at == addr
        {
            return Some(name);
        }
        let name = match self.lists_by_addr.get(&addr) {
            Some(&name) => name,
            None => {
                let name = ListName(next_name(self.lists.len()));
                self.lists.push(list.clone());
                self.lists_by_addr.insert(addr, name);
                name
            }
        };
        self.recent_list = (addr, Some(name));
        Some(name)
    }
}

/// What a trace item's id can be given as: a [`Name`] of the same table, or a text
/// (interned when recorded). `Option`s name nothing when `None`.
pub trait IntoName {
    /// The name of `self` in `names` (`None`: no id).
    fn into_name(self, names: &mut Names) -> Option<Name>;
}

impl IntoName for Name {
    fn into_name(self, _: &mut Names) -> Option<Name> {
        Some(self)
    }
}

impl IntoName for &Arc<str> {
    #[inline(always)]
    fn into_name(self, names: &mut Names) -> Option<Name> {
        Some(names.intern_arc(self))
    }
}

impl IntoName for Arc<str> {
    fn into_name(self, names: &mut Names) -> Option<Name> {
        Some(names.intern_arc(&self))
    }
}

impl IntoName for &str {
    fn into_name(self, names: &mut Names) -> Option<Name> {
        Some(names.intern(self))
    }
}

impl IntoName for &String {
    fn into_name(self, names: &mut Names) -> Option<Name> {
        Some(names.intern(self))
    }
}

impl IntoName for String {
    fn into_name(self, names: &mut Names) -> Option<Name> {
        Some(names.intern_owned(self.into()))
    }
}

impl IntoName for std::borrow::Cow<'_, Arc<str>> {
    #[inline(always)]
    fn into_name(self, names: &mut Names) -> Option<Name> {
        Some(names.intern_arc(&self))
    }
}

impl<'a, T> IntoName for &'a Option<T>
where
    &'a T: IntoName,
{
    #[inline(always)]
    fn into_name(self, names: &mut Names) -> Option<Name> {
        // A `match`, not `and_then`: `Option::and_then` is only `#[inline]`, and was left
        // out of line on the loop step (about 30 instructions a step, ADR 0073).
        match self {
            Some(t) => t.into_name(names),
            None => None,
        }
    }
}

impl<T: IntoName> IntoName for Option<T> {
    #[inline(always)]
    fn into_name(self, names: &mut Names) -> Option<Name> {
        // A `match`, as above.
        match self {
            Some(t) => t.into_name(names),
            None => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One text has one name whichever allocation or form it is given in, different
    /// texts have different names, and every name reads back as its text.
    #[test]
    fn one_text_one_name() {
        let mut names = Names::default();
        let a: Arc<str> = Arc::from("worker");
        let a2: Arc<str> = Arc::from("worker");
        let b: Arc<str> = Arc::from("root");
        let na = names.intern_arc(&a);
        assert_eq!(names.intern_arc(&a), na, "by address, cached");
        assert_eq!(names.intern_arc(&a2), na, "another allocation, same text");
        assert_eq!(names.intern("worker"), na);
        assert_eq!(names.intern_owned(Arc::from("worker")), na);
        let nb = names.intern_arc(&b);
        assert_ne!(na, nb);
        assert_eq!(names.get(na), "worker");
        assert_eq!(names.get(nb), "root");
        assert_eq!(names.len(), 2);
        let n = names.intern("made at run time");
        assert_eq!(names.get(n), "made at run time");
        assert_eq!(names.len(), 3);
    }

    /// Two ids whose first cache slots collide are both kept in the cache (one in its
    /// second slot), so neither is looked up by hashing on every use; each still reads
    /// back as its own text.
    #[test]
    fn colliding_ids_both_stay_cached() {
        let ids: Vec<Arc<str>> = (0..200).map(|i| Arc::from(format!("id{i}"))).collect();
        let (a, b) = ids
            .iter()
            .enumerate()
            .find_map(|(i, a)| {
                ids[i + 1..]
                    .iter()
                    // ... and whose second slot is another place (one address in 64
                    // has both slots alike, and then the later id takes the earlier's
                    // place: the cache promises a second place, not a third).
                    .find(|b| {
                        slot_of(addr_of(a)) == slot_of(addr_of(b))
                            && second_slot_of(addr_of(b)) != slot_of(addr_of(b))
                    })
                    .map(|b| (a, b))
            })
            .expect("200 allocations over 64 slots collide somewhere");
        let mut names = Names::default();
        let (na, nb) = (names.intern_arc(a), names.intern_arc(b));
        assert_ne!(na, nb);
        let cached =
            |names: &Names, id: &Arc<str>| names.recent.iter().any(|(at, _)| *at == addr_of(id));
        assert!(cached(&names, a) && cached(&names, b), "both cached");
        for _ in 0..3 {
            assert_eq!(names.intern_arc(a), na);
            assert_eq!(names.intern_arc(b), nb);
        }
        assert!(cached(&names, a) && cached(&names, b), "neither evicted");
        assert_eq!(names.get(na), &**a);
        assert_eq!(names.get(nb), &**b);
    }

    /// A shared candidate list is held once; an empty one is not held at all.
    #[test]
    fn lists_by_allocation() {
        let mut names = Names::default();
        let one: Candidates = vec![Arc::from("worker")].into();
        let l = names.intern_list(&one).expect("a non-empty list");
        assert_eq!(names.intern_list(&one.clone()), Some(l));
        assert_eq!(&**names.list(l), &*one);
        assert_eq!(names.intern_list(&Candidates::none()), None);
        let other: Candidates = vec![Arc::from("a"), Arc::from("b")].into();
        assert_ne!(names.intern_list(&other), Some(l));
    }
}
