# Applied to both psql's output from Cairn and psql.expected before they are
# compared: it hides only what differs by nature between the two systems.
# Everything else must match PostgreSQL 15 exactly.
#
# OIDs of user objects (pg_dump's index query, in expanded display): Cairn
# derives them from descriptor IDs. The script checks separately that they
# are the right objects' OIDs.
s/^\(oid  *\)| [0-9][0-9]*$/\1| <oid>/
s/^\(conoid  *\)| [0-9][0-9]*$/\1| <oid>/
# pg_class.relpages counts 8 kB heap pages; Cairn's relations live in KV
# ranges and have none to count.
s/^\(relpages  *\)| [0-9][0-9]*$/\1| <pages>/
# LOCATION (VERBOSITY verbose) names PostgreSQL's C source file and line.
/^LOCATION:  /d
# Sizes (\dt+ and the other + forms): PostgreSQL counts 8 kB pages,
# Cairn the bytes its KV ranges hold. psql pads each column to its widest
# value, so with the sizes the padding differs too: runs of spaces and of
# dashes compare by presence, not length (the values themselves still
# must match).
s/[0-9][0-9]* \(bytes\|kB\|MB\|GB\)/<size>/g
s/  */ /g
s/--*/-/g
