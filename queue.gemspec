# frozen_string_literal: true

require_relative "lib/queue/version"

Gem::Specification.new do |spec|
  spec.name = "queue"
  spec.version = JobQueue::VERSION
  spec.summary = "Background jobs for Rails on Sidekiq's Redis format, with a Rust engine"
  spec.description = <<~DESC
    A Sidekiq-compatible job server whose engine is Rust: reliable fetch (no job lost when a process
    dies, and only running jobs re-run), atomic punctual scheduling, batched fetches, and Sidekiq's wire format, so Sidekiq's client,
    API and dashboard keep working against the same Redis.
  DESC
  spec.authors = ["queue contributors"]
  spec.license = "MIT"
  spec.required_ruby_version = ">= 3.0"

  spec.files = Dir[
    "Cargo.toml", "Cargo.lock", "README.md", "CHANGELOG.md", "LICENSE",
    "lib/**/*.rb", "lib/generators/queue/*/templates/*.tt", "lib/queue/web/views/*.erb",
    "lib/queue/web/assets/*.css", "exe/*",
    "ext/queue/extconf.rb", "ext/queue/Cargo.toml", "ext/queue/src/**/*.rs",
    "ext/queue_core/Cargo.toml", "ext/queue_core/src/**/*.{rs,lua}"
  ]
  spec.bindir = "exe"
  spec.executables = ["queue"]
  spec.require_paths = ["lib"]
  spec.extensions = ["ext/queue/extconf.rb"]
  # No runtime dependencies: json ships with every supported Ruby as a default gem, and declaring it
  # would make `gem install --install-dir DIR` look for a json .gem to put in DIR. The dashboard
  # (`require "queue/web"`) needs rack, which every Rails app has; `queue web` alone also uses puma.
end
