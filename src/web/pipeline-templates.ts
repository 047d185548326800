/**
 * Starting points for a repository's `.hangar.yml` (docs/pipelines.md), shown on the Templates page. Each text is
 * a whole pipeline file and must pass the same check a build makes (test/web/templates.test.ts posts every one to
 * the validate endpoint), so only keys `pipelineConfigSchema` accepts appear here. Hangar has no dependency cache
 * yet: the templates download Gradle, CocoaPods and npm dependencies on each build rather than use a `cache` key
 * that would be refused.
 */
export interface PipelineTemplate {
  /** The anchor of its section on the page. */
  id: string;
  title: string;
  /** One line: what it builds and where. */
  summary: string;
  text: string;
}

/** The export options every iOS template makes from the installed profiles (docs/signing.md "Using it"). */
const IOS_EXPORT_OPTIONS = `node -e 'const m=JSON.parse(process.env.HANGAR_IOS_PROFILES); const p={}; for (const [id,v] of Object.entries(m)) p[id]=v.uuid;
            console.log(JSON.stringify({method:"app-store-connect",signingStyle:"manual",provisioningProfiles:p}))' > export.json
          plutil -convert xml1 -o ExportOptions.plist export.json`;

export const PIPELINE_TEMPLATES: readonly PipelineTemplate[] = [
  {
    id: "ios",
    title: "iOS app (xcodebuild)",
    summary:
      "Archives a workspace on a Mac runner and exports a signed .ipa with the project's uploaded certificate and profiles (HANGAR_KEYCHAIN_PATH, HANGAR_IOS_PROFILES).",
    text: `# iOS: archive and export a signed .ipa on a Mac runner.
# Upload the certificate and profiles on the project page (Signing); set App to your workspace and scheme.
pipelines:
  ios:
    platform: ios
    timeout_s: 3600
    env:
      SCHEME: App
    triggers:
      - { event: push, branches: ["main", "release/**"] }
    steps:
      - name: archive
        run: |
          xcodebuild -workspace "$SCHEME.xcworkspace" -scheme "$SCHEME" -configuration Release \\
            -destination generic/platform=iOS -archivePath build/App.xcarchive \\
            OTHER_CODE_SIGN_FLAGS="--keychain $HANGAR_KEYCHAIN_PATH" CODE_SIGN_STYLE=Manual archive
      - name: export
        run: |
          ${IOS_EXPORT_OPTIONS}
          xcodebuild -exportArchive -archivePath build/App.xcarchive -exportOptionsPlist ExportOptions.plist -exportPath build
    artifacts:
      - "build/*.ipa"
      - { path: "build/App.xcarchive/dSYMs/**", when: on_success }
`,
  },
  {
    id: "android",
    title: "Android app (Gradle)",
    summary:
      "Assembles the app and runs its unit tests with Gradle on any runner offering android; the JUnit results show on the build page, the .apk is kept.",
    text: `# Android: assemble and unit-test with Gradle.
# For a signed release build, read HANGAR_ANDROID_KEYSTORE_PATH and friends in signingConfigs (docs/signing.md).
pipelines:
  android:
    platform: android
    timeout_s: 3600
    cancel_previous: true
    env:
      GRADLE_OPTS: "-Dorg.gradle.daemon=false"
    triggers:
      - { event: push, branches: ["main"] }
      - { event: pull_request }
    steps:
      - name: assemble
        run: ./gradlew assembleDebug
      - name: unit tests
        run: ./gradlew testDebugUnitTest
    reports:
      junit: ["app/build/test-results/**/*.xml"]
    artifacts:
      - "app/build/outputs/apk/**/*.apk"
      - { path: "app/build/reports/tests/**", when: always }
`,
  },
  {
    id: "flutter",
    title: "Flutter (Android and iOS)",
    summary: "Two pipelines from one Flutter app: tests and an .apk on an android runner, a signed .ipa on a Mac runner.",
    text: `# Flutter: the flutter tool must be on the runner's PATH.
pipelines:
  flutter-android:
    platform: android
    timeout_s: 3600
    cancel_previous: true
    triggers:
      - { event: push, branches: ["main"] }
      - { event: pull_request }
    steps:
      - flutter pub get
      - flutter analyze
      - flutter test
      - flutter build apk --release
    artifacts: ["build/app/outputs/flutter-apk/*.apk"]
  flutter-ios:
    platform: ios
    timeout_s: 3600
    triggers:
      - { event: push, branches: ["main"] }
    steps:
      - flutter pub get
      - name: ipa
        run: |
          ${IOS_EXPORT_OPTIONS}
          flutter build ipa --release --export-options-plist=ExportOptions.plist
    artifacts: ["build/ios/ipa/*.ipa"]
`,
  },
  {
    id: "react-native",
    title: "React Native (Android and iOS)",
    summary:
      "Installs the JavaScript dependencies, runs Jest, then builds the Android .apk with Gradle and the iOS .ipa with CocoaPods and xcodebuild.",
    text: `# React Native: Node.js on the runner; jest-junit in devDependencies writes the test report.
pipelines:
  rn-android:
    platform: android
    timeout_s: 3600
    cancel_previous: true
    env:
      JEST_JUNIT_OUTPUT_DIR: reports
    triggers:
      - { event: push, branches: ["main"] }
      - { event: pull_request }
    steps:
      - npm ci
      - name: jest
        run: npx jest --ci --reporters=default --reporters=jest-junit
      - name: assemble
        run: cd android && ./gradlew assembleRelease
    reports:
      junit: ["reports/*.xml"]
    artifacts: ["android/app/build/outputs/apk/release/*.apk"]
  rn-ios:
    platform: ios
    timeout_s: 3600
    env:
      SCHEME: App
    triggers:
      - { event: push, branches: ["main"] }
    steps:
      - npm ci
      - name: pods
        run: cd ios && pod install
      - name: archive
        run: |
          cd ios
          xcodebuild -workspace "$SCHEME.xcworkspace" -scheme "$SCHEME" -configuration Release \\
            -destination generic/platform=iOS -archivePath build/App.xcarchive \\
            OTHER_CODE_SIGN_FLAGS="--keychain $HANGAR_KEYCHAIN_PATH" CODE_SIGN_STYLE=Manual archive
          ${IOS_EXPORT_OPTIONS}
          xcodebuild -exportArchive -archivePath build/App.xcarchive -exportOptionsPlist ExportOptions.plist -exportPath build
    artifacts: ["ios/build/*.ipa"]
`,
  },
];
