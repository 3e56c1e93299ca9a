# frozen_string_literal: true

# The app's own specs (run by spec/rails/rails_app_spec.rb as `bundle exec rspec` here): workers in
# the test modes and the shared example, on an in-memory database. Nothing touches Redis.
ENV["RAILS_ENV"] = "test"
ENV["DATABASE_PATH"] = ":memory:"
require_relative "../config/environment"
require "queue/testing"
require "queue/rspec"

ActiveRecord::Schema.verbose = false
load Rails.root.join("db", "schema.rb")

RSpec.configure do |config|
  config.before do
    Entry.delete_all
    JobQueue::Worker.clear_all
    JobQueue::Testing.fake!
  end
end
