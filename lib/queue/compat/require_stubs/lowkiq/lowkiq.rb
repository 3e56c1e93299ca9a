# frozen_string_literal: true

# `require "lowkiq"` once queue/compat/lowkiq is loaded: the shim, not the gem.
require_relative "../../lowkiq"
