//! A curious server, a lying server, and hostile messages.
