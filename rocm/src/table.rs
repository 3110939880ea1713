//! A library's symbol table: one field per C function, each a `Result` so a
//! missing symbol is an error value at the call, not a failure to load. A
//! call site takes the function with `table.name.clone()?`, which converts a
//! missing symbol into the library's own error.

/// Declares a symbol table struct and its loader.
macro_rules! symbol_table {
    ($(#[$meta:meta])* $vis:vis struct $name:ident {
        $( $field:ident : fn($($arg:ty),* $(,)?) -> $ret:ty ; )*
    }) => {
        $(#[$meta])*
        $vis struct $name {
            $(
                #[doc = concat!("`", stringify!($field), "`")]
                pub $field: Result<unsafe extern "C" fn($($arg),*) -> $ret, crate::loader::MissingSymbol>,
            )*
        }

        impl $name {
            /// The C names of every symbol in the table, for checks that a
            /// real library exports them.
            pub const SYMBOLS: &'static [&'static str] = &[$(stringify!($field)),*];

        }

        impl crate::library::SymbolTable for $name {
            fn load(lib: &crate::loader::Loaded) -> Self {
                // SAFETY: each field's type is the C declaration of the
                // symbol of the same name in the library's headers.
                #[allow(unsafe_code)]
                unsafe {
                    $name { $( $field: lib.function(stringify!($field)), )* }
                }
            }
        }
    };
}

pub(crate) use symbol_table;

/// Declares C enum values as Rust constants together with a table of their
/// C names (`TABLE: &[(c_name, value)]`), so a header probe can compare every
/// declared value with the real headers and none can be left out.
macro_rules! c_constants {
    ($(#[$meta:meta])* $vis:vis $table:ident {
        $( $name:ident : $ty:ty = $c:literal => $value:expr ; )*
    }) => {
        $(
            #[doc = concat!("`", $c, "`")]
            $vis const $name: $ty = $value;
        )*
        $(#[$meta])*
        $vis const $table: &[(&str, i64)] = &[$(($c, $name as i64)),*];
    };
}

pub(crate) use c_constants;

/// Declares the sizes and field offsets of `#[repr(C)]` structs as a table
/// of `(C struct, C field or "sizeof", bytes)`, so a header probe can compare
/// each with the real headers: one line per field (`"c_field" =>
/// rust_field`), every struct's size included.
macro_rules! c_layouts {
    ($(#[$meta:meta])* $vis:vis $table:ident {
        $( $c:literal = $ty:ty { $( $cf:literal => $field:ident ),* $(,)? } ; )*
    }) => {
        $(#[$meta])*
        $vis const $table: &[(&str, &str, usize)] = &[
            $(
                ($c, "sizeof", std::mem::size_of::<$ty>()),
                $( ($c, $cf, std::mem::offset_of!($ty, $field)), )*
            )*
        ];
    };
}

pub(crate) use c_layouts;

/// `Drop` for an owner of one library object: calls the release function
/// from the library's table once on the owner's handle. Without the symbol
/// there is nothing to release with (the object could not have been made
/// through a table lacking it either), so the drop does nothing.
macro_rules! release_on_drop {
    ($owner:ty, $lib:ident . $release:ident ( $handle:ident )) => {
        impl Drop for $owner {
            fn drop(&mut self) {
                if let Ok(f) = &self.$lib.table.$release {
                    // SAFETY: the owner holds the only handle, released
                    // once, here.
                    unsafe { f(self.$handle) };
                }
            }
        }
    };
}
pub(crate) use release_on_drop;

/// [`Binding::describe`](crate::library::Binding::describe) through the
/// table's `const char *(status)` string function `$f`: how rocBLAS, MIOpen,
/// RCCL, hiprtc and HIP word a status (ROCr writes its text through a
/// pointer instead).
macro_rules! describe_with {
    ($f:ident) => {
        #[doc = concat!("`", stringify!($f), "`.")]
        fn describe(&self, status: Self::Status) -> Option<String> {
            crate::library::status_text(&self.$f, status)
        }
    };
}
pub(crate) use describe_with;

/// [`Binding`](crate::library::Binding) for a library whose calls return an
/// `i32` status, 0 on success, worded by a `const char *(status)` function
/// (`$describe`) and failing with
/// [`StatusError`](crate::library::StatusError): rocBLAS and MIOpen bind
/// alike and differ only in these names.
macro_rules! status_binding {
    ($table:ty {
        library: $library:expr,
        describe: $describe:ident,
        names: $names:expr,
        unknown: $unknown:literal $(,)?
    }) => {
        impl crate::library::Binding for $table {
            const LIBRARY: crate::loader::LibrarySpec = $library;
            type Status = i32;
            type Error = crate::library::StatusError;
            const SUCCESS: i32 = 0;
            const STATUS_NAMES: &'static [(i32, &'static str)] = $names;
            const UNKNOWN_STATUS: &'static str = $unknown;

            crate::table::describe_with!($describe);

            fn error(&self, call: &'static str, status: i32) -> crate::library::StatusError {
                crate::library::StatusError::of_call(self, call, status)
            }
        }
    };
}
pub(crate) use status_binding;
