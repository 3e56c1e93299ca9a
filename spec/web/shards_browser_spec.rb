# frozen_string_literal: true

require_relative "web_helper"
require "capybara/rspec"
require "selenium-webdriver"
require_relative "chromium_driver"
require "queue/testing/redis_server"
require_relative "../apps/shards"

# The dashboard over two shards in headless Chromium: the shard selector in the header switches the
# pages between the shards, the session keeps the choice, and a button acts on the chosen shard.
RSpec.describe "the dashboard over two shards, in Chromium", type: :feature do
  Capybara.register_driver(:queue_chromium_shards) { |app| ChromiumDriver.headless(app) }

  before(:all) do
    @shard_b = JobQueue::Testing::RedisServer.new(prefix: "queue-test-shard-b", tcp: true).start
    Capybara.server = :puma, {Silent: true}
    Capybara.app = JobQueue::Web.new(session_secret: "shards" * 11)
    Capybara.default_driver = :queue_chromium_shards
    Capybara.default_max_wait_time = 5
  end

  after(:all) do
    Capybara.current_session.driver.quit
    @shard_b&.stop
  end

  let(:b) { Redis.new(path: @shard_b.socket) }

  before do
    b.flushall
    JobQueue.configure { |c| c.redis_shards = {"jobs_b" => {url: @shard_b.url}} }
  end

  it "switches the pages between shards with the header's selector, and clears a queue on the chosen shard" do
    ShardMainJob.perform_async(1)
    2.times { ShardBJob.perform_async(2) }

    visit "/queues"
    expect(page).to have_css("nav.shards a.on", text: "main")
    expect(page).to have_link("moving")
    expect(page).not_to have_link("on_b")

    within("nav.shards") { click_link "jobs_b" }
    expect(page).to have_css("nav.shards a.on", text: "jobs_b")
    expect(page).to have_link("on_b")
    expect(page).not_to have_link("moving")

    visit "/" # the session keeps the shard
    visit "/queues"
    expect(page).to have_link("on_b")
    click_link "on_b"
    expect(page).to have_content("ShardBJob")
    first(:button, "Delete").click
    expect(page).to have_css(".flash")
    expect(b.llen("queue:on_b")).to eq(1)
    expect(TestRedis.client.llen("queue:moving")).to eq(1)
  end
end
