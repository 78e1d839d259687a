"""The relevancy set (c), written for ragpulse: each frame is a question, a correct answer in other word forms,
a correct paraphrase, and two off-topic answers that share words with the question.

``python examples/eval/relevancy_frames.py`` writes ``relevancy_forms.tune.jsonl`` and
``relevancy_forms.holdout.jsonl`` (even frames tune, odd frames never tuned).
"""

from __future__ import annotations

import json
from pathlib import Path

# (question, other word forms, paraphrase, off-topic sharing words, off-topic sharing words)
EN = [
    (
        "What should I do if my badge is lost?",
        "Report the loss of your badge to security right away; they will deactivate it and print a new one.",
        "Tell the front desk immediately so the old card can be blocked and a replacement issued.",
        "Badges must be worn visibly at all times inside the building.",
        "Lost and found items are kept at reception for thirty days.",
    ),
    (
        "How do I apply for parental leave?",
        "Submit an application in the HR portal at least eight weeks before the planned start of your leave.",
        "Fill in the form under Absences in the HR portal two months ahead and your manager approves it.",
        "Parental leave is paid at 80 percent of your salary for the first six months.",
        "You can apply for internal jobs after one year in your current role.",
    ),
    (
        "When will my expense report be reimbursed?",
        "Reimbursements are paid with the next monthly payroll once your manager has approved the expenses.",
        "You get the money back on your next pay slip after approval.",
        "Expense reports must include an itemised receipt for every purchase over 25 dollars.",
        "The annual report on company expenses is published every March.",
    ),
    (
        "Can I carry over unused vacation days to next year?",
        "Up to five unused days carry over; anything above that expires on 31 December.",
        "Yes, but only five of them roll into the following year and the rest are forfeited.",
        "Vacation requests need your manager's approval at least two weeks in advance.",
        "Next year the office is closed between Christmas and New Year.",
    ),
    (
        "How many sick days are employees allowed per year?",
        "Each employee is allowed twelve paid sick days a year; a doctor's note is needed after three consecutive days.",
        "Staff get 12 days of paid illness absence annually.",
        "Employees who feel sick should stay home and inform their manager before 9 am.",
        "The gym is open to all employees every day of the year.",
    ),
    (
        "Who approves overtime payments?",
        "Overtime is approved by your line manager and then paid by payroll.",
        "Your direct supervisor signs off on extra hours before they are paid out.",
        "Overtime payments are taxed like regular salary.",
        "Payments to suppliers are approved by the finance director.",
    ),
    (
        "How do I reset my password?",
        "Click 'Forgot password' on the sign-in page; a reset link is emailed to you and expires after one hour.",
        "Use the link under the login form and follow the email you receive to choose a new one.",
        "Passwords must be at least twelve characters long and contain a number.",
        "Never share your password with anyone, including IT staff.",
    ),
    (
        "Why is my laptop running so slowly?",
        "Slowness is usually caused by the nightly backup or too many browser tabs; restarting usually fixes it.",
        "Most often the backup job or dozens of open tabs are eating the memory; reboot it and it should speed up.",
        "Laptops are replaced every four years under the hardware policy.",
        "Running is a great way to stay healthy, and the company pays for race entries.",
    ),
    (
        "How can I connect to the office VPN from home?",
        "Install the GlobalConnect client, then connect using your company email and the code from the authenticator app.",
        "Download GlobalConnect, sign in with your work address and confirm with your phone.",
        "The office is closed on public holidays, and the VPN is not monitored then.",
        "Working from home is allowed two days a week.",
    ),
    (
        "What is the deadline for submitting quarterly tax filings?",
        "Quarterly filings are due on the fifteenth day after the quarter closes.",
        "They must reach the tax office by the 15th of the month following each quarter's end.",
        "Tax filings can be submitted electronically through the government portal.",
        "The deadline for the marketing budget is the end of each quarter.",
    ),
    (
        "Does the insurance cover dental treatment?",
        "Dental treatment is covered up to 1,500 dollars a year, including cleanings and fillings.",
        "Yes, teeth cleaning and fillings are paid up to 1,500 dollars annually.",
        "Insurance cards are sent by post within two weeks of joining.",
        "The clinic on the ground floor offers free flu shots.",
    ),
    (
        "How long does shipping take to Canada?",
        "Shipments to Canada usually arrive within seven to ten business days.",
        "Orders sent there normally reach customers in about a week and a half.",
        "Shipping is free for orders over 50 dollars.",
        "Canada requires a customs declaration for every parcel.",
    ),
    (
        "Can I return a product after 30 days?",
        "Returns after 30 days are not accepted, except for defective items under warranty.",
        "No, past one month we only take back faulty goods covered by the warranty.",
        "Our products are made from recycled materials.",
        "To return to the main menu, press the back button.",
    ),
    (
        "How do I cancel my subscription?",
        "Go to Account > Billing and choose Cancellation; the plan stays active until the end of the paid period.",
        "Open the billing page in your account and end the plan there; you keep access until the period ends.",
        "Subscriptions renew automatically every month.",
        "Subscription prices increase by 5 percent in January.",
    ),
    (
        "What is the maximum file size I can upload?",
        "Uploads are limited to 2 GB per file.",
        "Each file can be at most two gigabytes.",
        "Files are stored in three data centres for redundancy.",
        "The maximum number of users per workspace is 500.",
    ),
    (
        "Why was my payment declined?",
        "Payments are usually declined because the card has expired or the billing address does not match.",
        "The usual reasons are an out-of-date card or an address that differs from the bank's records.",
        "We accept payment by card, bank transfer and PayPal.",
        "Declined invitations are removed from the calendar.",
    ),
    (
        "How often are backups taken?",
        "Backing up runs every night at 2 am, and a weekly full backup is taken on Sundays.",
        "The system copies all data nightly at two in the morning, with a complete copy once a week.",
        "Backups are encrypted with AES-256.",
        "Meetings are taken in the large conference room.",
    ),
    (
        "Where can I park my car at the office?",
        "Parking is in the underground garage; register your car's plate with reception first.",
        "Use the garage below the building after giving your number plate to the front desk.",
        "Car sharing is encouraged to reduce emissions.",
        "The office is located near the central station.",
    ),
    (
        "How do I install the printer driver?",
        "The driver installs automatically when you add the printer under Settings > Devices.",
        "Add the device in Settings and Windows fetches the software for it by itself.",
        "Printer paper is stored in the cupboard next to the kitchen.",
        "Drivers of company cars must keep a logbook.",
    ),
    (
        "What are the opening hours of the canteen?",
        "The canteen opens at 11:30 and closes at 2 pm on weekdays.",
        "Lunch is served from half past eleven until two, Monday to Friday.",
        "The canteen's menu changes every week.",
        "Opening a new bank account takes about three days.",
    ),
    (
        "Is training paid by the company?",
        "The company pays for job-related trainings up to 2,000 dollars per year.",
        "Yes, courses relevant to your role are funded up to 2,000 dollars annually.",
        "Training rooms can be booked through the calendar.",
        "The company was founded in 1998.",
    ),
    (
        "How do I change my bank details for salary payments?",
        "Changes to bank details are made in the HR portal under Personal data and apply from the next payroll.",
        "Update the account number in your profile on the HR site; the next salary goes to the new account.",
        "Salary payments are made on the 25th of each month.",
        "Bank holidays are listed in the company calendar.",
    ),
    (
        "What happens if I miss the enrolment deadline for benefits?",
        "Missing it means you are enrolled in the default plan until the next open enrolment in November.",
        "You stay on the standard plan and can choose again in November.",
        "Benefits include a gym membership and a public transport pass.",
        "The deadline for project proposals is Friday.",
    ),
    (
        "How do I report a phishing email?",
        "Use the Report Phish button in Outlook; the security team reviews reported messages within an hour.",
        "Click the button in your mail client that flags suspicious messages, and security looks at it quickly.",
        "Phishing is the most common cause of data breaches.",
        "Email signatures must follow the brand guidelines.",
    ),
    (
        "Can contractors access the internal wiki?",
        "Contractors get read access to the wiki once their manager requests it.",
        "External staff can read it after their supervisor asks IT for permission.",
        "Contractors are paid monthly on invoice.",
        "The internal wiki was migrated to a new server last year.",
    ),
    (
        "How do I book a meeting room?",
        "Rooms are booked in the calendar by adding the room as a guest to your meeting.",
        "Invite the room like a participant in your calendar invitation and it is reserved.",
        "Meeting notes should be shared within 24 hours.",
        "Book club meets every second Thursday.",
    ),
    (
        "What is the notice period when resigning?",
        "Resignations require one month's notice, or three months for managers.",
        "You must tell the company four weeks ahead; managers need to give three months.",
        "The notice board is next to the lifts.",
        "Resigning from a committee has to be done in writing.",
    ),
    (
        "Why does the app crash when I open the camera?",
        "The crash happens when camera permission was denied; enable it in the phone's settings and reopen the app.",
        "It fails because it is not allowed to use the lens; allow it in your device settings.",
        "The camera app supports photos and videos up to 4K.",
        "Open the app and tap the menu to see your orders.",
    ),
    (
        "How much does the premium plan cost?",
        "Premium costs 12 dollars per month, or 120 dollars when paid yearly.",
        "It is 12 dollars a month, with two months free on annual billing.",
        "The premium plan includes priority support and unlimited projects.",
        "Costs for travel must be approved in advance.",
    ),
    (
        "How do I export my data as a spreadsheet?",
        "Exporting is under Reports > Download, where you choose CSV or Excel format.",
        "In Reports there is a download option that saves everything as CSV or XLSX.",
        "Data is stored in the EU and never sold to third parties.",
        "Spreadsheet training is offered every month.",
    ),
    (
        "Who do I contact about a broken chair?",
        "Broken furniture is reported to Facilities through the service desk form.",
        "Raise a ticket with the building maintenance team.",
        "Chairs can be adjusted in height with the lever under the seat.",
        "Contact details of all employees are in the directory.",
    ),
    (
        "When does the free trial end?",
        "The trial ends fourteen days after sign-up, and you are not charged unless you choose a plan.",
        "You have two weeks from registration; nothing is billed automatically.",
        "Free shipping applies to all orders this week.",
        "The trial version includes all premium features.",
    ),
    (
        "How do I add a new user to our team account?",
        "Admins add users under Team > Members by entering the person's email address.",
        "An administrator invites the colleague by email from the members page.",
        "Each team account has its own billing settings.",
        "New users should complete the security training first.",
    ),
    (
        "Is the building accessible for wheelchair users?",
        "All entrances are accessible, with ramps at the main entrance and lifts to every floor.",
        "Yes, there are ramps at the front and elevators serve all levels.",
        "The building was renovated in 2015.",
        "Wheelchairs can be borrowed at the hospital entrance.",
    ),
    (
        "What causes the error 'disk quota exceeded'?",
        "It appears when your home directory uses more than its 20 GB allowance; delete old files or ask for more space.",
        "You have filled the 20 GB assigned to you; clean up or request an increase.",
        "Disk encryption is enabled on all company laptops.",
        "Errors in invoices should be reported to accounting.",
    ),
    (
        "How can I improve my credit score?",
        "Paying bills on time, keeping card balances low and not opening many new accounts improve it.",
        "Settle every bill when due and use little of your available credit.",
        "Credit cards can be used abroad without fees.",
        "The score of the last match was 3 to 1.",
    ),
    (
        "Which documents do I need to open an account?",
        "You need a valid passport or ID card and a proof of address not older than three months.",
        "Bring identification and a recent utility bill showing where you live.",
        "Accounts are closed automatically after two years without activity.",
        "Documents can be scanned at the printer on each floor.",
    ),
    (
        "How do I update the firmware on the router?",
        "Updating is done from the admin page under System > Firmware, where you upload the new image.",
        "Log in to the router's web interface and install the latest version from the system menu.",
        "The router should be placed in a central spot for the best signal.",
        "Update your contact details in the portal.",
    ),
]

ZH = [
    (
        "工牌丢了怎么办？",
        "工牌遗失后请立即告知保安部门，他们会停用旧卡并补办新卡。",
        "马上联系前台挂失，旧卡会被注销，再给你重新制作一张。",
        "进入办公楼时必须佩戴工牌。",
        "失物招领处设在一楼前台，物品保留三十天。",
    ),
    (
        "如何申请产假？",
        "产假申请需在人事系统中提交，至少提前八周。",
        "在人力资源平台的请假模块填写表格，提前两个月交给主管审批。",
        "产假期间工资按百分之八十发放。",
        "员工入职满一年后可以申请内部转岗。",
    ),
    (
        "报销款什么时候到账？",
        "报销的费用在经理审批后随下一次工资一起发放。",
        "审批通过后，钱会在下个月发薪时打到你的卡上。",
        "报销单必须附上每笔超过一百元的发票。",
        "公司年度费用报告每年三月公布。",
    ),
    (
        "年假可以顺延到明年吗？",
        "未休的年假最多可以顺延五天，其余在十二月三十一日作废。",
        "可以，但只能带五天到下一年，剩下的会清零。",
        "休年假需要提前两周得到经理批准。",
        "明年春节期间办公室放假七天。",
    ),
    (
        "每年有几天病假？",
        "每位员工每年享有十二天带薪病假，连续三天以上需开医生证明。",
        "员工一年可以因身体不适带薪休息12天。",
        "员工生病时应在早上九点前告知经理。",
        "健身房每天都对员工开放。",
    ),
    (
        "加班费由谁审批？",
        "加班由直属经理审批，之后由薪酬部门发放。",
        "你的直接上级确认额外工时后，工资组负责支付。",
        "加班费和工资一样需要缴税。",
        "供应商的付款由财务总监审批。",
    ),
    (
        "密码忘了怎么重置？",
        "在登录页点击“忘记密码”，系统会发送重置链接，一小时内有效。",
        "点登录框下面的链接，按照邮件提示设置一个新的即可。",
        "密码长度至少十二位，并且要包含数字。",
        "不要把密码告诉任何人，包括技术人员。",
    ),
    (
        "电脑为什么运行很慢？",
        "运行变慢通常是夜间备份或浏览器标签页太多造成的，重启一般就能解决。",
        "多半是备份任务或开了几十个网页占满了内存，重新开机就会快起来。",
        "笔记本电脑按规定每四年更换一次。",
        "跑步有益健康，公司报销马拉松报名费。",
    ),
    (
        "在家怎么连接公司VPN？",
        "安装GlobalConnect客户端，用公司邮箱登录并输入验证器上的动态码。",
        "下载GlobalConnect，用工作邮箱登录，再用手机确认即可。",
        "办公室节假日关闭，期间VPN无人值守。",
        "员工每周可以在家办公两天。",
    ),
    (
        "季度纳税申报的截止日期是哪天？",
        "季度申报须在季度结束后的第十五天之前完成。",
        "每个季度结束后的下个月十五号前要报到税务局。",
        "纳税申报可以通过电子税务局在线提交。",
        "市场部预算的截止日期是每季度末。",
    ),
    (
        "保险报销牙科治疗吗？",
        "牙科治疗每年最多报销一千五百元，包括洗牙和补牙。",
        "洗牙、补牙这些看牙的费用每年能报1500元。",
        "保险卡会在入职两周内邮寄给你。",
        "一楼诊所免费接种流感疫苗。",
    ),
    (
        "寄到上海要几天？",
        "寄往上海的包裹一般三到五个工作日送达。",
        "通常一周之内就能收到。",
        "订单满九十九元包邮。",
        "上海分公司的地址在浦东新区。",
    ),
    (
        "超过三十天还能退货吗？",
        "超过三十天不再受理退货，保修期内的质量问题除外。",
        "不行，过了一个月只有坏的商品才能在保修范围内退回。",
        "我们的产品使用可回收材料制造。",
        "按返回键可以回到主菜单。",
    ),
    (
        "怎么取消订阅？",
        "进入账户的账单页面选择取消，已付费的周期结束前仍可使用。",
        "在个人中心的付费设置里停掉套餐，到期前照常能用。",
        "订阅每月自动续费。",
        "订阅价格明年一月上涨百分之五。",
    ),
    (
        "上传文件最大能多大？",
        "单个文件上传上限为2GB。",
        "每个文件不能超过两个G。",
        "文件保存在三个数据中心，互为备份。",
        "每个工作区最多可容纳五百名成员。",
    ),
    (
        "为什么我的付款被拒绝了？",
        "付款被拒通常是因为银行卡过期或账单地址不一致。",
        "常见原因是卡已经失效，或者填写的地址和银行记录对不上。",
        "我们支持银行卡、转账和支付宝付款。",
        "被拒绝的会议邀请会从日历中移除。",
    ),
    (
        "多久备份一次？",
        "系统每天凌晨两点自动备份，每周日再做一次完整备份。",
        "数据每晚两点复制一份，每周还有一次全量复制。",
        "备份数据使用AES-256加密。",
        "会议一般在大会议室举行。",
    ),
    (
        "公司哪里可以停车？",
        "停车请到地下车库，先在前台登记车牌号。",
        "车可以放在楼下的库里，记得把号牌告诉前台。",
        "公司鼓励拼车出行以减少排放。",
        "公司位于火车站附近。",
    ),
    (
        "打印机驱动怎么安装？",
        "在设置的设备页面添加打印机后，驱动会自动安装。",
        "在系统设置里加上这台设备，电脑会自己下载所需的软件。",
        "打印纸放在茶水间旁边的柜子里。",
        "公司车辆的驾驶员必须填写行车记录。",
    ),
    (
        "食堂几点开门？",
        "食堂工作日十一点半开门，下午两点关门。",
        "周一到周五中午十一点半到两点供应午饭。",
        "食堂菜单每周更换一次。",
        "开一个新的银行账户大约需要三天。",
    ),
    (
        "培训费用公司出吗？",
        "与工作相关的培训，公司每年最多承担两千元。",
        "是的，和岗位有关的课程每年能报销2000元。",
        "培训室可以在日历系统中预订。",
        "公司成立于1998年。",
    ),
    (
        "工资卡怎么变更？",
        "在人事系统的个人信息中修改银行卡信息，下次发薪起生效。",
        "到人力资源网站的个人资料里更新账号，下个月的薪水就会打到新账户。",
        "工资在每月二十五日发放。",
        "银行节假日安排见公司日历。",
    ),
    (
        "错过了福利登记的截止日期会怎样？",
        "错过后将自动加入默认方案，直到十一月的下一次开放登记。",
        "你会沿用标准方案，等到十一月才能重新选择。",
        "福利包括健身卡和公交补贴。",
        "项目申报的截止日期是本周五。",
    ),
    (
        "收到钓鱼邮件怎么举报？",
        "在Outlook中点击“举报钓鱼”按钮，安全团队会在一小时内处理。",
        "点邮件客户端里标记可疑信息的按钮，安全部门很快就会查看。",
        "钓鱼是数据泄露最常见的原因。",
        "邮件签名必须符合品牌规范。",
    ),
    (
        "外包人员能访问内部知识库吗？",
        "外包人员在经理申请后可获得知识库的只读权限。",
        "外部员工在主管向IT申请后就能查看。",
        "外包人员按月凭发票结算。",
        "内部知识库去年迁移到了新服务器。",
    ),
    (
        "会议室怎么预订？",
        "在日历中把会议室作为参会人添加即可预订。",
        "发会议邀请时把房间当作参与者邀请，就订好了。",
        "会议纪要应在二十四小时内分享。",
        "读书会每隔一周的周四举行。",
    ),
    (
        "辞职需要提前多久通知？",
        "辞职需提前一个月通知，管理人员需提前三个月。",
        "要提前四周告诉公司，经理级别要提前三个月。",
        "公告栏在电梯旁边。",
        "辞去委员会职务需要书面申请。",
    ),
    (
        "为什么打开相机时应用会闪退？",
        "闪退是因为相机权限被拒绝，请在手机设置中开启后重新打开应用。",
        "因为没有允许它使用摄像头，在系统设置里授权就好了。",
        "相机应用支持最高4K的照片和视频。",
        "打开应用后点击菜单可以查看订单。",
    ),
    (
        "高级版多少钱？",
        "高级版每月12元，按年付费120元。",
        "一个月十二块，年付相当于送两个月。",
        "高级版包含优先支持和无限项目。",
        "差旅费用需要事先审批。",
    ),
    (
        "怎么把数据导出成表格？",
        "在报表的下载页面选择CSV或Excel格式即可导出。",
        "报表里有下载选项，可以保存为CSV或XLSX。",
        "数据存储在境内，不会出售给第三方。",
        "每月都有表格软件培训。",
    ),
    (
        "椅子坏了找谁？",
        "家具损坏请通过服务台表单报给行政部门。",
        "给楼宇维修组提个工单就行。",
        "椅子高度可以用座位下面的拉杆调节。",
        "所有员工的联系方式都在通讯录里。",
    ),
    (
        "免费试用什么时候结束？",
        "试用期在注册后十四天结束，除非选择套餐否则不会扣费。",
        "从注册起有两周时间，不会自动收钱。",
        "本周所有订单免运费。",
        "试用版包含全部高级功能。",
    ),
    (
        "怎么给团队账户添加新成员？",
        "管理员在团队的成员页面输入对方邮箱即可添加。",
        "由管理员在成员页通过邮件邀请同事加入。",
        "每个团队账户都有独立的账单设置。",
        "新成员应先完成安全培训。",
    ),
    (
        "大楼方便坐轮椅的人进出吗？",
        "所有入口都有无障碍设施，正门有坡道，电梯通往每一层。",
        "方便，前门有斜坡，各楼层都有升降梯。",
        "大楼于2015年翻新。",
        "医院门口可以借用轮椅。",
    ),
    (
        "出现“磁盘配额已满”是什么原因？",
        "这是因为你的个人目录超过了20GB的配额，删除旧文件或申请扩容即可。",
        "你已经用满了分配的20GB空间，清理一下或者申请更多。",
        "所有公司电脑都启用了磁盘加密。",
        "发票中的错误应报告给会计。",
    ),
    (
        "怎样提高信用分？",
        "按时还款、降低信用卡使用额度、少开新账户都能提高信用分。",
        "每期账单都准时还清，少用可用额度。",
        "信用卡在境外使用免手续费。",
        "上一场比赛的比分是三比一。",
    ),
    (
        "开户需要哪些材料？",
        "需要有效的身份证或护照，以及三个月内的住址证明。",
        "带上身份证件和最近的水电费账单。",
        "账户两年不活动将自动关闭。",
        "每层的打印机都可以扫描材料。",
    ),
    (
        "路由器固件怎么升级？",
        "在管理页面的系统固件菜单上传新固件即可升级。",
        "登录路由器的网页后台，在系统菜单里安装最新版本。",
        "路由器应放在中央位置以获得最佳信号。",
        "请在门户网站更新你的联系方式。",
    ),
]

SHAPES = ("word_forms", "paraphrase", "off_topic_shared_words", "off_topic_shared_words")


def main() -> None:
    out = Path(__file__).parent
    rows: dict[str, list[dict[str, object]]] = {"tune": [], "holdout": []}
    for lang, frames in (("en", EN), ("zh", ZH)):
        for i, (q, *answers) in enumerate(frames):
            split = "tune" if i % 2 == 0 else "holdout"
            for k, (shape, a) in enumerate(zip(SHAPES, answers, strict=True)):
                shape_l = "zh_" + shape if lang == "zh" else shape
                rows[split].append(
                    {
                        "id": f"relevancy_{lang}_{i:02d}_{k}",
                        "question": q,
                        "answer": a,
                        "contexts": [],
                        "shape": shape_l,
                        "relevant": int(k < 2),
                        "split": split,
                    }
                )
    for split, items in rows.items():
        path = out / f"relevancy_forms.{split}.jsonl"
        path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in items), encoding="utf-8")
        print(path, len(items))


if __name__ == "__main__":
    main()
