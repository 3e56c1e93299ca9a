# frozen_string_literal: true

# Writes the Makefile that builds the Rust extension with cargo.
#
# The rb_sys gem is not needed (it is not packaged for Debian): `make` runs cargo with RUBY pointing at
# this interpreter (rb-sys's build script reads its headers and config from it), and `make install`
# copies the library to $(sitearchdir)/queue/queue.so, where `require "queue/queue"` finds it. RubyGems
# passes its own sitearchdir when it installs the gem.
#
# Inside a git checkout cargo builds into the workspace's target/ (fast rebuilds); inside an installed
# gem it builds into ext/queue/target and removes it after installing (it weighs ~300 MB). A
# CARGO_TARGET_DIR from the environment is used instead of either, and is never removed: it is shared.

require "rbconfig"

ext_dir = __dir__
root = File.expand_path("../..", ext_dir)
checkout = File.exist?(File.join(root, ".git"))
own_target_dir = File.join(ext_dir, "target")
shared_target_dir = ENV["CARGO_TARGET_DIR"].to_s.empty? ? nil : File.expand_path(ENV["CARGO_TARGET_DIR"])
target_dir = shared_target_dir || (checkout ? File.join(root, "target") : own_target_dir)
remove_target_dir = !checkout && target_dir == own_target_dir
dlext = RbConfig::CONFIG["DLEXT"]
cargo = ENV.fetch("CARGO", "cargo")
locked = File.exist?(File.join(root, "Cargo.lock")) ? "--locked" : ""

abort "cargo (Rust) is required to build queue: apt-get install cargo, or use rustup" unless system("#{cargo} --version", out: File::NULL, err: File::NULL)

File.write("Makefile", <<~MAKE)
  RUBY = #{RbConfig.ruby}
  CARGO = #{cargo}
  sitearchdir = #{RbConfig::CONFIG["sitearchdir"]}
  TARGET_DIR = #{target_dir}
  LIB = $(TARGET_DIR)/release/libqueue.so
  DLIB = queue.#{dlext}

  all: $(DLIB)

  $(DLIB): FORCE
  \tRUBY=$(RUBY) $(CARGO) build --release #{locked} --manifest-path #{root}/Cargo.toml -p queue --target-dir $(TARGET_DIR)
  \tcp $(LIB) $(DLIB).tmp && mv $(DLIB).tmp $(DLIB)

  install: $(DLIB)
  \tmkdir -p $(DESTDIR)$(sitearchdir)/queue
  \tcp $(DLIB) $(DESTDIR)$(sitearchdir)/queue/$(DLIB)
  #{remove_target_dir ? "\trm -rf $(TARGET_DIR)" : ""}

  clean:
  \trm -f $(DLIB)

  FORCE:

  .PHONY: all install clean FORCE
MAKE
