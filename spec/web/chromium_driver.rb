# frozen_string_literal: true

require "capybara"
require "selenium-webdriver"

# Capybara's Selenium driver for the browser specs, which also retries an element that a page load
# detached when chromedriver reports it as an unknown error ("Node with given id does not belong to
# the document") instead of a stale element: Capybara retries a stale element within its wait, and
# the generic error failed a CI run once a POST's redirect replaced the page under a text matcher.
# A real unknown error still fails the expectation, once the wait is over.
class ChromiumDriver < Capybara::Selenium::Driver
  ARGUMENTS = %w[--headless=new --no-sandbox --disable-dev-shm-usage --disable-gpu --window-size=1280,900
    --force-device-scale-factor=1].freeze

  # A driver on Debian's chromium and chromium-driver (when installed there), headless, 1280x900.
  def self.headless(app)
    options = ::Selenium::WebDriver::Chrome::Options.new
    options.binary = "/usr/bin/chromium" if File.exist?("/usr/bin/chromium")
    ARGUMENTS.each { |arg| options.add_argument(arg) }
    service = ::Selenium::WebDriver::Service.chrome(path: "/usr/bin/chromedriver") if File.exist?("/usr/bin/chromedriver")
    new(app, browser: :chrome, options: options, service: service)
  end

  def invalid_element_errors
    @chromium_invalid_element_errors ||= [*super, ::Selenium::WebDriver::Error::UnknownError]
  end
end
