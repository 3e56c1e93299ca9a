# frozen_string_literal: true

require_relative "web_helper"
require "capybara/rspec"
require "selenium-webdriver"
require_relative "chromium_driver"
require_relative "../apps/api_retry" # the failing workers, for our client's side

# The dashboard in a real browser: headless Chromium (Debian's chromium + chromium-driver) driven by
# Capybara/Selenium, over the dashboard served by Puma. It clicks the buttons a person would and checks
# what changed in Redis. Each page is saved as a screenshot under tmp/screenshots/ (desktop and phone
# widths) for a person to look at.
RSpec.describe "the dashboard in Chromium", type: :feature do
  SCREENSHOTS = File.expand_path("../../tmp/screenshots", __dir__)

  Capybara.register_driver(:queue_chromium) { |app| ChromiumDriver.headless(app) }

  before(:all) do
    Capybara.server = :puma, {Silent: true}
    Capybara.app = JobQueue::Web.new(session_secret: "browser" * 10)
    Capybara.default_driver = :queue_chromium
    Capybara.default_max_wait_time = 5
    FileUtils.mkdir_p(SCREENSHOTS)
  end

  after(:all) { Capybara.current_session.driver.quit }

  let(:redis) { TestRedis.client }

  before { JobQueue.config.logger.level = Logger::FATAL } # the failures here are on purpose

  # Saves the page as NAME.png (1280 wide) and NAME-phone.png (390 wide, as an iPhone 12-15).
  def screenshot(name)
    window = page.driver.browser.manage.window
    window.resize_to(1280, 900)
    page.save_screenshot(File.join(SCREENSHOTS, "#{name}.png"))
    window.resize_to(390, 844)
    page.save_screenshot(File.join(SCREENSHOTS, "#{name}-phone.png"))
    window.resize_to(1280, 900)
  end

  def doomed_ordered_worker
    ordered_worker("BrowserOrderedWorker") do
      self.max_retry_count = 0
      define_singleton_method(:retry_in) { |_count| 0 }
      define_singleton_method(:perform) { |_batch| raise ArgumentError, "payment gateway said no" }
    end
  end

  it "requeues a morgue entry of an ordered worker by clicking" do
    worker = doomed_ordered_worker
    worker.perform_async([{id: "order-17", payload: {"amount" => 12}}, {id: "order-18", payload: {"amount" => 5}}])
    drain(ordered_server(worker).thread_work(0))
    expect(JobQueue::Ordered.stats["by_worker"]["BrowserOrderedWorker"]["morgue_length"]).to eq(2)

    visit "/ordered"
    screenshot("ordered")
    click_link "BrowserOrderedWorker"
    expect(page).to have_content("payment gateway said no")
    screenshot("morgue")
    within(:xpath, "//tr[.//code[text()='order-17']]") { click_button "Requeue" }

    expect(page).to have_css(".flash", text: "Requeued 1 morgue entry.")
    expect(redis.zscore(lowkiq_key(worker, "morgue:all_ids_lex"), "order-17")).to be_nil
    expect(redis.zscore(lowkiq_key(worker, "all_ids_lex"), "order-17")).not_to be_nil
    expect(redis.zscore(lowkiq_key(worker, "morgue:all_ids_lex"), "order-18")).not_to be_nil
    expect(page).not_to have_css("code", text: "order-17")
  end

  it "opens the Batches page: progress, pending and failures, the failed jobs, the callbacks fired, and the batch on a dead job" do
    require_relative "../apps/batches"
    batch = JobQueue::Batch.new
    batch.description = "Browser import"
    batch.on(:death, BatchCallbacks)
    batch.on(:complete, BatchCallbacks)
    batch.jobs do
      BatchJob.perform_async("b1")
      BatchJob.perform_async("b2")
      DyingJob.perform_async("b3")
      BatchJob.perform_async("b4", "die") # fails into the retry set
    end
    server = ServerProcess.new(app: "batches.rb", args: ["-c", "2", "-q", "batch", "-q", "default"]).start
    begin
      wait_until("death and complete callbacks") { redis.llen("callbacks") == 2 }
    ensure
      expect(server.stop.exitstatus).to eq(0)
    end

    visit "/batches"
    row = find(:xpath, "//tr[.//code[text()='#{batch.bid}']]")
    expect(row).to have_content("Browser import")
    expect(row).to have_css("progress.batch[value='50']")
    expect(row.all("td.num").map(&:text)).to eq(%w[2 2 4])
    expect(row).to have_content("complete, death")
    screenshot("batches")
    click_link batch.bid
    expect(page).to have_css("h1", text: "Browser import")
    expect(page).to have_content("b3 dies")
    expect(page).to have_css("td", text: "dead")
    expect(page).to have_css("td", text: "retrying")
    expect(page).to have_xpath("//tr[td[text()='death']]/td[text()='yes']")
    screenshot("batch")

    retrying = JSON.parse(redis.zrange("retry", 0, 0).first)["jid"]
    visit "/retries"
    click_link href: %r{/retries/[\d.]+-#{retrying}}
    expect(page).to have_link(batch.bid, href: "/batches/#{batch.bid}")
    click_link batch.bid
    expect(page).to have_css("h1", text: "Browser import")
  end

  it "pauses and unpauses a queue by clicking, and a running server follows" do
    require_relative "../apps/basic"
    server = ServerProcess.new(app: "basic.rb", args: ["-c", "2", "-q", "default"]).start
    begin
      EchoWorker.perform_async(1)
      wait_until("the server to run the first job") { redis.llen("ran:echo") == 1 }

      visit "/queues"
      within(:xpath, "//tr[.//a[text()='default']]") { click_button "Pause" }
      expect(page).to have_css(".flash", text: "Paused queue default")
      expect(page).to have_css(".tag.warn", text: "paused")
      expect(redis.smembers("jq:paused")).to eq(["default"])
      screenshot("queues-paused")
      # The server has seen it once its idle waiter no longer blocks on the queue.
      # (Only the idle waiters' BLMOVE count; the batch checker blocks on nothing.)
      wait_until("the server to stop waiting on default") { redis.client(:list).none? { |c| c["flags"].include?("b") && c["cmd"] == "blmove" } }
      EchoWorker.perform_async(2)
      expect(redis.llen("queue:default")).to eq(1)

      visit "/queues/default"
      expect(page).to have_content("paused")
      click_button "Unpause"
      expect(page).to have_css(".flash", text: "Unpaused queue default.")
      expect(page).to have_current_path("/queues/default")
      expect(redis.smembers("jq:paused")).to eq([])
      wait_until("the server to run the job pushed while paused") { redis.llen("ran:echo") == 2 }
    ensure
      expect(server.stop.exitstatus).to eq(0)
    end
  end

  it "disables, enables and runs a cron schedule by clicking" do
    require_relative "../apps/basic"
    JobQueue::Cron.load_from_hash("nightly" => {"class" => "EchoWorker", "cron" => "0 3 * * * UTC", "args" => [7], "description" => "nightly echo"})
    visit "/cron"
    row = "//tr[.//a[text()='nightly']]"
    within(:xpath, row) do
      expect(page).to have_content("0 3 * * * UTC")
      expect(page).to have_css(".tag.ok", text: "enabled")
      click_button "Disable"
    end
    expect(page).to have_css(".flash", text: "Disabled cron schedule nightly.")
    expect(redis.hget("cron_job:nightly", "status")).to eq("disabled")
    within(:xpath, row) { expect(page).to have_css(".tag.warn", text: "disabled") }

    within(:xpath, row) { click_button "Run now" }
    expect(page).to have_css(".flash", text: "Pushed cron schedule nightly.")
    jid = JSON.parse(redis.lindex("queue:default", 0))["jid"]
    within(:xpath, row) { expect(page).to have_css("code.jid", text: jid) }
    screenshot("cron")

    within(:xpath, row) { click_button "Enable" }
    expect(page).to have_css(".flash", text: "Enabled cron schedule nightly.")
    expect(redis.hget("cron_job:nightly", "status")).to eq("enabled")

    click_link "nightly"
    expect(page).to have_content("nightly echo")
    expect(page).to have_css("code.jid", text: jid)
    click_button "Disable"
    # The flash, not the path, shows the POST was answered: the path was already /cron/nightly.
    expect(page).to have_css(".flash", text: "Disabled cron schedule nightly.")
    expect(page).to have_current_path("/cron/nightly")
    expect(redis.hget("cron_job:nightly", "status")).to eq("disabled")
    screenshot("cron-job")
  end

  it "retries a dead job by clicking, and shows every page" do
    server = ServerProcess.new(app: "api_retry.rb", args: ["-c", "2", "-q", "default", "-g", "browser"]).start
    begin
      ApiFailingWorker.perform_async("kill") # dies at its first failure
      ApiFailingWorker.perform_async(3600) # waits in the retry set
      ApiScheduledWorker.perform_in(3600, "later")
      wait_until("the failures to be filed", timeout: 20) { redis.zcard("dead") == 1 && redis.zcard("retry") == 1 }
      wait_until("the process to register") { redis.scard("processes") == 1 }

      visit "/"
      expect(page).to have_css(".card", text: "Dead")
      screenshot("dashboard")
      visit "/busy"
      expect(page).to have_content("browser")
      screenshot("busy")
      visit "/scheduled"
      screenshot("scheduled")
      visit "/retries"
      expect(page).to have_content("always fails")
      screenshot("retries")
    ensure
      expect(server.stop.exitstatus).to eq(0) # nothing runs the job once it is back in its queue
    end

    visit "/dead"
    dead_jid = JSON.parse(redis.zrange("dead", 0, 0).first)["jid"]
    expect(page).to have_content(dead_jid)
    screenshot("dead")
    click_link href: %r{/dead/[\d.]+-#{dead_jid}}
    expect(page).to have_content("ApiRetry::Boom: always fails")
    screenshot("dead-entry")
    click_button "Retry now"

    expect(page).to have_css(".flash", text: "Queued 1 job.")
    expect(redis.zcard("dead")).to eq(0)
    expect(queued_jids = redis.lrange("queue:default", 0, -1).map { |j| JSON.parse(j)["jid"] }).to include(dead_jid)
    visit "/queues"
    screenshot("queues")
    visit "/queues/default"
    expect(page).to have_content(dead_jid)
    screenshot("queue")
    expect(queued_jids.size).to eq(1)
    held = stub_const("BrowserReportWorker", Class.new do
      include JobQueue::ApplicationWorker
      idempotent!
      deduplicate :until_executed, ttl: 3600

      def perform(_account); end
    end)
    jid = held.perform_async(42)
    expect(held.perform_async(42)).to be_nil # dropped: the key is held
    visit "/dedup"
    expect(page).to have_content(jid)
    expect(page).to have_content("browser_report")
    screenshot("dedup")
  end

  it "shows per-class counts, times and the histogram of jobs a real server ran on the Metrics page" do
    require_relative "../apps/sidekiq_metrics"
    2.times { SkMetricsSleepWorker.perform_async(0.03) }
    SkMetricsSleepWorker.perform_async(0.4)
    SkMetricsFailingWorker.perform_async
    server = ServerProcess.new(app: "sidekiq_metrics.rb", args: ["-c", "2", "-q", "sk_metrics"]).start
    begin
      wait_until("the four jobs to run") { redis.llen("ran:sk_metrics") == 4 }
    ensure
      expect(server.stop.exitstatus).to eq(0) # the stop flushes the counts
    end

    visit "/"
    click_link "Metrics"
    expect(page).to have_css("h2", text: "Jobs, last 1 h")
    sleep_row = find(:xpath, "//table[@id='job-metrics']//tr[.//a[text()='SkMetricsSleepWorker']]")
    cells = sleep_row.all("td").map(&:text)
    expect(cells[1..2]).to eq(%w[3 0])
    total = cells[3][/\A([\d.]+) (ms|s)\z/] && (cells[3].end_with?("ms") ? cells[3].to_f : cells[3].to_f * 1000)
    expect(total).to be_between(460, 3000) # 30 + 30 + 400 ms at least
    failing = find(:xpath, "//table[@id='job-metrics']//tr[.//a[text()='SkMetricsFailingWorker']]").all("td").map(&:text)
    expect(failing[1..4]).to eq(["1", "1", "0 ms", "–"]) # counted, not timed
    # The busiest class's histogram by default: three runs, none under 30 ms.
    expect(page).to have_css("h2", text: "Run times of SkMetricsSleepWorker")
    hist = all("#histogram tbody tr").to_h { |tr| tr.all("td").map(&:text) }
    expect(hist.values.sum(&:to_i)).to eq(3)
    expect(hist.keys).not_to include("< 20 ms", "< 30 ms")
    screenshot("job-metrics")

    click_link "8 h"
    expect(page).to have_css("h2", text: "Jobs, last 8 h")
    click_link "SkMetricsFailingWorker"
    expect(page).to have_css("h2", text: "Run times of SkMetricsFailingWorker")
    expect(page).to have_no_css("#histogram tbody tr")
    expect(page).to have_current_path("/job-metrics?range=480&class=SkMetricsFailingWorker")
  end

  it "says how to turn the Metrics page on when config.sidekiq_metrics is false" do
    JobQueue.config.sidekiq_metrics = false
    visit "/job-metrics"
    expect(page).to have_css("#metrics-off", text: "c.sidekiq_metrics = 7")
  ensure
    JobQueue.config.sidekiq_metrics = 7
  end

end
