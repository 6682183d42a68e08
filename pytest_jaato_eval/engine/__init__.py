"""Everything that talks to jaato. Never imports pytest."""
