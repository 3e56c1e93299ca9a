# frozen_string_literal: true

# As `rails new` writes it: code reloads and nothing is eager-loaded, so a class is loaded when it is
# first used (spec/rails/ordered_listing_spec.rb). Every other environment eager-loads (application.rb).
Rails.application.configure do
  config.cache_classes = false
  config.eager_load = false
end
